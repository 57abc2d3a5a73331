"""Is the machine on mains power? (psutil, on every platform.)

The rule from the design: a machine with no battery is on AC; a battery whose
charger state cannot be told is *unknown*, which is not AC, so Owl does not
drain a battery it cannot read.

`OWL_POWER_SUPPLY_PATH=DIR` makes the Linux reading use DIR instead of
/sys/class/power_supply (laid out the same way: `BAT0/status`, `AC/online`,
...), so tests can plug and unplug a fake charger. psutil reads its module
constant at each call, so we point it there for the duration of the call
instead of re-implementing psutil's reading of the folder.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Any

log = logging.getLogger("owl.idle")

ENV_SUPPLY_PATH = "OWL_POWER_SUPPLY_PATH"

# One psutil constant is swapped while a call runs; no two calls may overlap.
_SWAP_LOCK = threading.Lock()


class Power:
    """Reads the charger state on demand (a few file reads; no thread)."""

    def __init__(self, supply_path: str | None = None) -> None:
        self.supply_path = supply_path or os.environ.get(ENV_SUPPLY_PATH) or None
        self._failed: str | None = None  # last failure logged, so it is logged once
        self.fixed = False  # the last reading found no battery: nothing to unplug

    @property
    def backend(self) -> str:
        return "psutil"

    def battery(self) -> Any:
        """psutil's battery record (percent, secsleft, power_plugged) or None.

        Raises OSError/AttributeError when the platform cannot be read at all.
        """
        import psutil

        if self.supply_path and sys.platform.startswith("linux"):
            from psutil import _pslinux

            with _SWAP_LOCK:
                saved = _pslinux.POWER_SUPPLY_PATH
                _pslinux.POWER_SUPPLY_PATH = self.supply_path
                try:
                    return psutil.sensors_battery()
                finally:
                    _pslinux.POWER_SUPPLY_PATH = saved
        return psutil.sensors_battery()

    def on_ac(self) -> bool | None:
        """True on mains (or no battery), False on battery, None if unknown."""
        try:
            battery = self.battery()
        except FileNotFoundError:
            # No power-supply class at all (desktops, VMs): nothing runs on a battery.
            battery = None
        except Exception as exc:  # psutil without sensors_battery, unreadable sysfs, ...
            why = f"{type(exc).__name__}: {exc}"
            if why != self._failed:
                log.warning("power state cannot be read: %s", why)
                self._failed = why
            return None
        self._failed = None
        self.fixed = battery is None
        if battery is None:
            return True
        plugged = battery.power_plugged
        if plugged is None and sys.platform.startswith("linux"):
            plugged = self._linux_mains_online()
        return None if plugged is None else bool(plugged)

    def _linux_mains_online(self) -> bool | None:
        """Any supply of type "Mains" online? None if there is no mains supply.

        psutil only looks at supplies named AC or AC0, then at the battery's
        status; many laptops name the charger ADP1 or ACAD, and a battery held
        at a charge limit says "Not charging" while plugged in.
        """
        root = self.supply_path or "/sys/class/power_supply"
        seen = False
        try:
            names = os.listdir(root)
        except OSError:
            return None
        for name in names:
            try:
                with open(os.path.join(root, name, "type")) as f:
                    if f.read().strip() != "Mains":
                        continue
                with open(os.path.join(root, name, "online")) as f:
                    online = f.read().strip()
            except OSError:
                continue
            seen = True
            if online == "1":
                return True
        return False if seen else None
