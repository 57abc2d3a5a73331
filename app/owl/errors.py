"""Errors that reach a person: each str() is one line saying why."""


class Refused(Exception):
    """A verb that was refused; str() is one line saying why."""


class NoDaemon(Exception):
    """No daemon is running for this OWL_HOME."""


class StoreError(Exception):
    """The database cannot be used (corrupt, from a newer Owl, unwritable)."""


class DamagedStore(StoreError):
    """The database file is damaged or empty where Owl expects its rows; str()
    names the file and what saves what can still be read."""
