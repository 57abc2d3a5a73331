"""Is the person here? Input hooks, idle readers and power, behind one interface.

    monitor = IdleMonitor(on_input=engine.wake)   # called on every input event
    monitor.start()
    state = read_machine(monitor, Power(), after=600, require_ac=True,
                         now=time.monotonic())

Nothing heavy is imported here: pynput, Xlib, jeepney and psutil are loaded
when the monitor starts or power is first read, so the CLI stays fast and
works with no display.
"""

from .base import BackendError
from .choose import Plan, choose
from .monitor import IdleMonitor
from .power import Power
from .state import FIXED_POWER_POLL, INPUT_POLL, POWER_POLL, RETRY, MachineState, read_machine

__all__ = [
    "BackendError",
    "IdleMonitor",
    "Plan",
    "choose",
    "Power",
    "MachineState",
    "read_machine",
    "INPUT_POLL",
    "POWER_POLL",
    "FIXED_POWER_POLL",
    "RETRY",
]
