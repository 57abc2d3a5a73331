#!/bin/sh
# Install the Claude Code CLI from npm into a cache prefix, for the test rig.
#
# Usage: tools/install-claude.sh            # prints the path of `claude`
#   OWL_CLAUDE_PREFIX=DIR   where to install (default $HOME/.cache/owl-test/claude)
#   OWL_CLAUDE_VERSION=V    npm version, or "latest" for the newest (default: the
#                           pinned version below, the newest the tests pass with)
#
# The tests find it there (tests/support/claude.py) without touching PATH.
# A call that finds the wanted version installed does nothing and prints the
# same path; another version in the prefix is replaced, never silently reused.
set -eu

PINNED=2.1.332

prefix="${OWL_CLAUDE_PREFIX:-${HOME}/.cache/owl-test/claude}"
version="${OWL_CLAUDE_VERSION:-$PINNED}"
bin="$prefix/bin/claude"
package=@anthropic-ai/claude-code

installed() {
    # "2.1.332 (Claude Code)" -> 2.1.332; nothing when it does not run
    [ -x "$bin" ] && "$bin" --version 2>/dev/null | awk 'NR == 1 { print $1 }' || true
}

if [ "$version" = latest ]; then
    if ! command -v npm >/dev/null 2>&1; then
        echo "install-claude.sh: npm is needed to find the latest version (install nodejs and npm)" >&2
        exit 1
    fi
    if ! version=$(npm view "$package" version 2>/dev/null) || [ -z "$version" ]; then
        echo "install-claude.sh: npm could not say which version of $package is the latest" >&2
        exit 1
    fi
fi

have=$(installed)
if [ "$have" = "$version" ]; then
    echo "$bin"
    exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
    echo "install-claude.sh: npm is needed (install nodejs and npm)" >&2
    exit 1
fi
if [ -n "$have" ]; then
    echo "install-claude.sh: $bin is $have; installing $version" >&2
fi

mkdir -p "$prefix"
# --prefix keeps it out of the global node_modules; the package's own
# postinstall fetches the native binary for this platform.
npm install --global --prefix "$prefix" --no-audit --no-fund --loglevel=error \
    "$package@$version" >&2

have=$(installed)
if [ "$have" != "$version" ]; then
    echo "install-claude.sh: installed $version, but $bin --version says ${have:-nothing}" >&2
    exit 1
fi
echo "$bin"
