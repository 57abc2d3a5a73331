#!/usr/bin/env bash
# Regenerates the Python bindings of the KDE Wayland protocols Owl speaks, with
# pywayland's own scanner, from Debian's plasma-wayland-protocols XML:
#   app/owl/idle/wlproto/kde_idle.py   org_kde_kwin_idle (the daemon's fallback idle source)
#   tests/support/kde_fake_input.py    org_kde_kwin_fake_input (input for the kwin tests)
# The output is committed: a person running Owl on sway or KDE needs neither the
# XML nor the scanner, only pywayland itself. Run this after upgrading pywayland.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
xml=/usr/share/plasma-wayland-protocols
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
"$here/.venv/bin/python" -m pywayland.scanner -o "$out" \
  -i /usr/share/wayland/wayland.xml "$xml/idle.xml" "$xml/fake-input.xml" >/dev/null 2>&1
# The scanner imports wl_seat from a sibling module it also wrote; use pywayland's
# own, so the proxies bound from the registry are the same classes.
fix() { sed 's/^from \.wayland import /from pywayland.protocol.wayland import /' "$1" > "$2"; }
fix "$out/idle.py" "$here/app/owl/idle/wlproto/kde_idle.py"
fix "$out/fake_input.py" "$here/tests/support/kde_fake_input.py"
