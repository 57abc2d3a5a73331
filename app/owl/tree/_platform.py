"""Which backend this machine uses, chosen once at import (as psutil does)."""

from __future__ import annotations

import sys
from types import ModuleType

if sys.platform.startswith("linux"):
    from . import linux as current
elif sys.platform == "darwin":
    from . import macos as current
else:
    from . import posix as current

backend: ModuleType = current

# Set by become_subreaper(): orphans of our descendants now come to us.
# Until then they go to init (or launchd), where a sweep looks for them.
adopting = False
