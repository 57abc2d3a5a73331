"""Stand-in for PyObjCTools.AppHelper: callAfter runs on the main run loop."""

from _fake_runloop import MAIN


def callAfter(fn, *args, **kwargs):
    MAIN.put(lambda: fn(*args, **kwargs))
