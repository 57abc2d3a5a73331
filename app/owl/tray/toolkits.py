"""Which `Toolkit` class serves a pystray backend, and the settings it reads at start.

Apart from `owl.tray.toolkit` (the interface) so that the platform modules,
which build on the interface, are imported only from here and only once the
backend is chosen: nothing imports GTK or AppKit before then.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

from owl.tray.toolkit import GTK_BACKENDS, Toolkit


def toolkit_for(backend: str) -> type[Toolkit]:
    """The Toolkit class for a pystray backend name."""
    if backend in GTK_BACKENDS:
        from owl.tray.gtk import GtkToolkit

        return GtkToolkit
    if backend == "darwin":
        from owl.tray.darwin import DarwinToolkit

        return DarwinToolkit
    return Toolkit


@contextlib.contextmanager
def toolkit_environment(backend: str) -> Iterator[None]:
    """Settings the toolkit reads once, at start-up, and then restored.

    pystray picks its backend from PYSTRAY_BACKEND at import; a toolkit may
    want more (`Toolkit.environment`). All are read while the icon is
    created; putting the old values back afterwards keeps them out of the
    environment that Runs inherit.
    """
    wanted = {"PYSTRAY_BACKEND": backend} | toolkit_for(backend).environment()
    saved = {key: os.environ.get(key) for key in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
