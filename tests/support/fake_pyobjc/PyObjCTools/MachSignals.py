"""Stand-in for PyObjCTools.MachSignals: the handler runs inside the run loop."""

from __future__ import annotations

import signal as _signal

from _fake_runloop import MAIN, note

_handlers: dict = {}


def signal(signum, handler):
    previous = _handlers.get(signum)
    _handlers[signum] = handler
    note("MachSignals.signal", _signal.Signals(signum).name)
    _signal.signal(signum, lambda s, f: MAIN.put(lambda: _handlers[s](s)))
    return previous


def getsignal(signum):
    return _handlers.get(signum)
