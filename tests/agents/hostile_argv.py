"""An agent that records exactly what it was given: its argv (without the
interpreter and this script) as one JSON line appended to $ARGV_LOG, and its
environment's OWL_RUN_ID. With the word SYMLINK-HANDOFF=PATH in its prompt it
then makes .owl/HANDOFF.md a symlink to PATH and fails, so that the next Run
would quote PATH if the handoff were followed through the link.
"""

from __future__ import annotations

import json
import os
import re
import sys


def main(argv: list[str]) -> int:
    with open(os.environ["ARGV_LOG"], "a", encoding="utf-8", errors="surrogateescape") as f:
        f.write(json.dumps({"run": os.environ.get("OWL_RUN_ID"), "argv": argv}) + "\n")
    m = re.search(r"SYMLINK-HANDOFF=(\S+)", " ".join(argv))
    if m and os.environ.get("OWL_RUN_ID") and not os.path.lexists(".owl/HANDOFF.md"):
        os.makedirs(".owl", exist_ok=True)
        os.symlink(m.group(1), ".owl/HANDOFF.md")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
