"""Errors that reach a person: each str() is one line saying why."""


class Refused(Exception):
    """A verb that was refused; str() is one line saying why."""


class NoDaemon(Exception):
    """No daemon is running for this OWL_HOME."""


class Unreachable(NoDaemon):
    """A daemon holds this home's lock, yet its socket does not answer: no
    other may be started beside it. `starting` while it has not listened yet
    (or is stopping): a moment's wait, not a refusal."""

    def __init__(self, message: str, starting: bool = False) -> None:
        super().__init__(message)
        self.starting = starting


class StoreError(Exception):
    """The database cannot be used (corrupt, from a newer Owl, unwritable)."""


class DamagedStore(StoreError):
    """The database file is damaged or empty where Owl expects its rows; str()
    names the file and what saves what can still be read."""
