#!/usr/bin/env bash
# Sets up everything Owl needs on a Debian/Ubuntu or macOS machine, idempotently:
#   tools/setup.sh          what Owl needs to run
#   tools/setup.sh --test   and what its tests need (display stack, Claude Code CLI)
# The virtual environment is .venv beside this folder: on Linux on the system
# Python so that the desktop's own GTK bindings (python3-gi) are visible to the
# tray; on macOS on the newest Homebrew or python.org Python 3.11+.
#
# Once set up, it is not done again: a stamp in .venv holds a hash of
# pyproject.toml and this file, and while they are unchanged the set-up is
# one hash and a compare (tools/owl then reaches Owl at once). First time,
# each step says what it does on one line.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
want_test=0
[ "${1:-}" = "--test" ] && want_test=1

# The stamp: what this set-up was made from. A test set-up covers the plain one.
setup_key() { cat pyproject.toml tools/setup.sh 2>/dev/null | { sha256sum 2>/dev/null || shasum -a 256; } | cut -c1-64; }
key="$(setup_key || true)"
stamp_ok() { [ -x .venv/bin/python ] && [ -f ".venv/$1" ] && [ "$(cat ".venv/$1")" = "$key" ]; }
if stamp_ok .owl-setup-test || { [ $want_test -eq 0 ] && stamp_ok .owl-setup; }; then
  exit 0
fi
step() { echo "owl setup: $*" >&2; }

run_pkgs=(git bubblewrap passt python3-seccomp python3 python3-venv python3-dev gcc python3-gi gir1.2-gtk-3.0 gir1.2-ayatanaappindicator3-0.1
          libxss1 xdg-utils procps util-linux dbus)
test_pkgs=(xvfb xdotool trayer dunst imagemagick xprintidle desktop-file-utils x11-utils chromium
           dbus-x11 dbus-daemon zsh fish groff-base man-db slirp4netns
           # signing at accept, with real keys: gpg (and its agent), ssh-keygen
           gnupg openssh-client
           # ordinary builds in a contained Run: go build, go test ./..., make, mvn -o and java
           golang-go make maven default-jdk-headless python3-setuptools python3-wheel
           # what tests look through: strace (a Run's syscalls), gsettings (GNOME's power keys)
           strace libglib2.0-bin
           # headless Wayland compositors for the idle tests, and a StatusNotifier watcher
           mutter kwin-wayland sway wtype plasma-wayland-protocols haskell-status-notifier-item-utils
           # the system tier: a Debian 13 desktop machine built and booted (tools/desktop-vm)
           mmdebstrap qemu-system-x86 qemu-utils e2fsprogs)

apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  step "installing Debian packages: ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

if command -v apt-get >/dev/null 2>&1; then
  step "checking Debian packages (${#run_pkgs[@]} to run Owl$([ $want_test -eq 1 ] && echo ", ${#test_pkgs[@]} for its tests"))"
  apt_install "${run_pkgs[@]}"
  if [ $want_test -eq 1 ]; then
    command -v npm >/dev/null 2>&1 || test_pkgs+=(nodejs npm)
    apt_install "${test_pkgs[@]}"
  fi
fi

# The interpreter: Owl needs Python 3.11 or newer. OWL_PYTHON forces one.
py_ok() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; }
pick_python() {
  if [ -n "${OWL_PYTHON:-}" ]; then echo "$OWL_PYTHON"; return 0; fi
  if [ "$(uname -s)" != Darwin ]; then
    if [ -x /usr/bin/python3 ]; then echo /usr/bin/python3; else echo python3; fi
    return 0
  fi
  # macOS: /usr/bin/python3 is the Command Line Tools' 3.9 (or a stub that offers
  # to install them). Take Homebrew's or python.org's newest that really runs.
  local name dir dirs
  IFS=: read -r -a dirs <<< "${PATH:-}"
  for name in python3.13 python3.12 python3.11; do
    for dir in ${dirs[@]+"${dirs[@]}"} /opt/homebrew/bin /usr/local/bin \
               "/Library/Frameworks/Python.framework/Versions/${name#python}/bin"; do
      if [ -n "$dir" ] && [ -x "$dir/$name" ] && py_ok "$dir/$name"; then
        echo "$dir/$name"; return 0
      fi
    done
  done
  return 1
}
if ! py="$(pick_python)"; then
  echo "setup.sh: Owl needs Python 3.11 or newer (python3.13, 3.12 or 3.11 not found): brew install python@3.12, or the python.org installer" >&2
  exit 1
fi
if ! py_ok "$py"; then
  echo "setup.sh: $py is not Python 3.11 or newer" >&2
  exit 1
fi
if [ -e .venv ] && ! py_ok .venv/bin/python; then
  step "rebuilding .venv: its Python is missing or older than 3.11"
  rm -rf .venv
fi
if [ ! -x .venv/bin/python ]; then
  step "making the virtual environment .venv on $py"
  "$py" -m venv .venv
fi
# On Linux the venv sees the distribution's packages, for its PyGObject (python3-gi,
# the tray), after its own: as paths in a .pth file of the venv, not as a system site
# (`venv --system-site-packages`), because a site directory's own .pth files run code
# at every interpreter start, and Owl starts one for every command, daemon, watchdog
# and Run. (On macOS the tray needs PyObjC from PyPI; a system site would add 3.9's.)
if [ "$(uname -s)" != Darwin ]; then
  ver="$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  site_dir=".venv/lib/python$ver/site-packages"
  mkdir -p "$site_dir"
  "$py" -c 'import os, site; print("\n".join(p for p in site.getsitepackages() if os.path.isdir(p)))' \
    > "$site_dir/owl-distribution-packages.pth"
  # A venv made by an older set-up: its system site goes, the paths above stand in.
  if [ -f .venv/pyvenv.cfg ] && grep -q '^include-system-site-packages = true' .venv/pyvenv.cfg; then
    sed -i 's/^include-system-site-packages = true/include-system-site-packages = false/' .venv/pyvenv.cfg
  fi
fi
step "installing Owl and its Python packages into .venv (pip)"
if [ $want_test -eq 1 ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
else
  .venv/bin/python -m pip install -q --disable-pip-version-check -e .
fi
# Owl is installed editable, so pip compiled none of its own modules: compile
# them now, or each `owl` would compile them from source where the environment
# sets PYTHONDONTWRITEBYTECODE (about half of a command's start).
.venv/bin/python -m compileall -q -j 0 app >/dev/null
if [ $want_test -eq 1 ]; then
  step "installing the Claude Code CLI the tests run (npm)"
  bash tools/install-claude.sh >/dev/null
  bash tools/install-agents.sh >/dev/null
fi
if [ $want_test -eq 1 ]; then echo "$key" > .venv/.owl-setup-test; fi
echo "$key" > .venv/.owl-setup
step "done: .venv/bin/owl (set up again only when pyproject.toml or tools/setup.sh change)"
