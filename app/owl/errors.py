"""Errors that reach a person: each str() is one line saying why."""


class Refused(Exception):
    """A verb that was refused; str() is one line saying why."""


class NoDaemon(Exception):
    """No daemon is running for this OWL_HOME."""


class StoreError(Exception):
    """The database cannot be used (corrupt, from a newer Owl, unwritable)."""
