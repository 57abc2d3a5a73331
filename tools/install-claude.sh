#!/bin/sh
# Install the Claude Code CLI from npm into a cache prefix, for the test rig.
#
# Usage: tools/install-claude.sh            # prints the path of `claude`
#   OWL_CLAUDE_PREFIX=DIR   where to install (default $HOME/.cache/owl-test/claude)
#   OWL_CLAUDE_VERSION=V    npm version or tag (default: latest)
#
# The tests find it there (tests/support/claude.py) without touching PATH.
# A second call with the same prefix does nothing and prints the same path.
set -eu

prefix="${OWL_CLAUDE_PREFIX:-${HOME}/.cache/owl-test/claude}"
version="${OWL_CLAUDE_VERSION:-latest}"
bin="$prefix/bin/claude"

# Installed and runnable: nothing to do.
if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then
    echo "$bin"
    exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
    echo "install-claude.sh: npm is needed (install nodejs and npm)" >&2
    exit 1
fi

mkdir -p "$prefix"
# --prefix keeps it out of the global node_modules; the package's own
# postinstall fetches the native binary for this platform.
npm install --global --prefix "$prefix" --no-audit --no-fund --loglevel=error \
    "@anthropic-ai/claude-code@$version" >&2

if ! "$bin" --version >/dev/null 2>&1; then
    echo "install-claude.sh: installed, but $bin --version fails" >&2
    exit 1
fi
echo "$bin"
