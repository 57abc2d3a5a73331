"""Stand-in for PyObjC's objc module."""


class error(Exception):
    pass


def namedSelector(name, signature=None):
    return lambda fn: fn


def python_method(fn):
    return fn
