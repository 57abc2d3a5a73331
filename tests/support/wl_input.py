"""Input into kwin the way a person's arrives: org_kde_kwin_fake_input, as a helper process.

Reads one command a line on stdin (`move DX`, `key`), sends it, waits for the
compositor to have it (a roundtrip), answers `ok`. Prints `ready` once bound,
or the reason it cannot. Ends with os._exit: a pywayland client may crash in
its own teardown at interpreter exit.
"""

from __future__ import annotations

import os
import sys

from pywayland.client import Display

from kde_fake_input import OrgKdeKwinFakeInput

KEY_A = 30  # evdev keycode


def main() -> None:
    display = Display()
    display.connect()
    found: dict = {}
    registry = display.get_registry()

    def on_global(registry, name: int, interface: str, version: int) -> None:
        found.setdefault(interface, (name, version))

    registry.dispatcher["global"] = on_global
    display.roundtrip()
    if OrgKdeKwinFakeInput.name not in found:
        print("the compositor offers no org_kde_kwin_fake_input", flush=True)
        os._exit(1)
    name, version = found[OrgKdeKwinFakeInput.name]
    fake = registry.bind(name, OrgKdeKwinFakeInput, min(version, 4))
    fake.authenticate("owl tests", "input for the idle tests")
    display.roundtrip()
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if words and words[0] == "move":
            dx = float(words[1])
            fake.pointer_motion(dx, dx)
        elif words and words[0] == "key":
            fake.keyboard_key(KEY_A, 1)
            fake.keyboard_key(KEY_A, 0)
        display.roundtrip()
        print("ok", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
