#!/usr/bin/env bash
# Sets up everything Owl needs on a Debian/Ubuntu or macOS machine, idempotently:
#   tools/setup.sh          what Owl needs to run
#   tools/setup.sh --test   and what its tests need (display stack, Claude Code CLI)
# The virtual environment is .venv beside this folder, on the system Python so
# that the desktop's own GTK bindings (python3-gi) are visible to the tray.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
want_test=0
[ "${1:-}" = "--test" ] && want_test=1

run_pkgs=(git python3 python3-venv python3-dev gcc python3-gi gir1.2-gtk-3.0 gir1.2-ayatanaappindicator3-0.1
          libxss1 xdg-utils procps util-linux dbus)
test_pkgs=(xvfb xdotool trayer dunst imagemagick xprintidle desktop-file-utils x11-utils chromium
           dbus-x11 dbus-daemon)

apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "installing: ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

if command -v apt-get >/dev/null 2>&1; then
  apt_install "${run_pkgs[@]}"
  if [ $want_test -eq 1 ]; then
    command -v npm >/dev/null 2>&1 || test_pkgs+=(nodejs npm)
    apt_install "${test_pkgs[@]}"
  fi
fi

py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
if [ ! -x .venv/bin/python ]; then
  "$py" -m venv --system-site-packages .venv
fi
if [ $want_test -eq 1 ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
else
  .venv/bin/python -m pip install -q --disable-pip-version-check -e .
fi
if [ $want_test -eq 1 ]; then
  bash tools/install-claude.sh >/dev/null
fi
