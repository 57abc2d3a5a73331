#!/bin/sh
# Install the Codex, Gemini, OpenCode, Copilot and pi CLIs from npm, and aider from
# PyPI, into the test cache, for the test rig.
#
# Usage: tools/install-agents.sh     # prints "codex PATH", "gemini PATH",
#                                    # "opencode PATH", "copilot PATH", "pi PATH",
#                                    # "aider PATH"
#   OWL_AGENTS_PREFIX=DIR   where to install (default $HOME/.cache/owl-test)
#   OWL_CODEX_VERSION=V     npm version of @openai/codex, or "latest" (default: pinned)
#   OWL_GEMINI_VERSION=V    npm version of @google/gemini-cli, or "latest" (default: pinned)
#   OWL_OPENCODE_VERSION=V  npm version of opencode-ai, or "latest" (default: pinned)
#   OWL_COPILOT_VERSION=V   npm version of @github/copilot, or "latest" (default: pinned)
#   OWL_PI_VERSION=V        npm version of @mariozechner/pi-coding-agent, or "latest"
#                           (default: pinned)
#   OWL_AIDER_VERSION=V     PyPI version of aider-chat, or "latest" (default: pinned)
#   OWL_AIDER_PYTHON=EXE    the Python aider's venv is made with (default: the first
#                           of python3.12, python3.11, python3.10, python3 that is
#                           3.10 to 3.12, the versions aider-chat 0.86 accepts; where
#                           there is none, aider is left out: "aider-missing WHY")
#
# Each goes into a prefix of its own (DIR/codex, DIR/gemini, DIR/opencode,
# DIR/copilot, DIR/pi, DIR/aider: a venv), like install-claude.sh: a call that finds the wanted version does
# nothing; another version in the prefix is replaced, never silently reused.
# aider's first install takes about 2 minutes (some 90 packages, 700 MB).
set -eu

CODEX_PINNED=0.171.0
GEMINI_PINNED=0.61.0
OPENCODE_PINNED=1.18.33  # its platform binary comes from npm too (optionalDependencies)
COPILOT_PINNED=1.0.102
PI_PINNED=0.73.1
AIDER_PINNED=0.86.2

root="${OWL_AGENTS_PREFIX:-${HOME}/.cache/owl-test}"

installed() {
    # "codex-cli 0.171.0" / "0.61.0" / "aider 0.86.2" / "GitHub Copilot CLI 1.0.102."
    # -> the last word of the first line, without a final dot
    # (pi prints its version on stderr: read there when stdout says nothing)
    [ -x "$1" ] && { v=$("$1" --version 2>/dev/null) && [ -n "$v" ] || v=$("$1" --version 2>&1); echo "$v"; } |
        awk 'NR == 1 { sub(/\.$/, "", $NF); print $NF }' || true
}

npm_installed() {  # prefix package bin
    # the version npm's record of the package says, where its command is there: read
    # in milliseconds, where `--version` starts the CLI (seconds each, on every test run)
    [ -x "$3" ] && python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' \
        "$1/lib/node_modules/$2/package.json" 2>/dev/null || true
}

install_one() {  # name package wanted
    name=$1 package=$2 version=$3
    prefix="$root/$name"
    bin="$prefix/bin/$name"
    if [ "$version" = latest ]; then
        if ! version=$(npm view "$package" version 2>/dev/null) || [ -z "$version" ]; then
            echo "install-agents.sh: npm could not say which version of $package is the latest" >&2
            exit 1
        fi
    fi
    have=$(npm_installed "$prefix" "$package" "$bin")
    if [ "$have" != "$version" ]; then
        [ -n "$have" ] && echo "install-agents.sh: $bin is $have; installing $version" >&2
        mkdir -p "$prefix"
        npm install --global --prefix "$prefix" --no-audit --no-fund --loglevel=error \
            "$package@$version" >&2
        have=$(installed "$bin")
        if [ "$have" != "$version" ]; then
            echo "install-agents.sh: installed $version, but $bin --version says ${have:-nothing}" >&2
            exit 1
        fi
    fi
    echo "$name $bin"
}

aider_python() {  # the first Python aider accepts (3.10 to 3.12), or nothing
    if [ -n "${OWL_AIDER_PYTHON:-}" ]; then
        echo "$OWL_AIDER_PYTHON"
        return
    fi
    for exe in python3.12 python3.11 python3.10 python3; do
        if command -v "$exe" >/dev/null 2>&1 &&
            "$exe" -c 'import sys, venv; sys.exit(not (3, 10) <= sys.version_info[:2] <= (3, 12))' \
                2>/dev/null; then
            echo "$exe"
            return
        fi
    done
}

install_aider() {  # wanted
    version=$1
    prefix="$root/aider"
    bin="$prefix/bin/aider"
    # aider-chat 0.86 runs on Python 3.10 to 3.12 only (Debian 13 has 3.13): where
    # none is here, say so and go on; aider's tests say why (and fail under CI)
    py=$([ -x "$prefix/bin/python" ] && echo "$prefix/bin/python" || aider_python)
    if [ -z "$py" ]; then
        echo "install-agents.sh: aider not installed: it needs Python 3.10 to 3.12 (with venv)," \
            "and this machine has $(python3 --version 2>&1 || echo 'no python3');" \
            "OWL_AIDER_PYTHON=EXE names one" >&2
        echo "aider-missing needs Python 3.10 to 3.12"
        return
    fi
    # the venv's record, not `aider --version`, which takes seconds to start
    have=$([ -x "$bin" ] && "$prefix/bin/python" -c \
        'import importlib.metadata as m; print(m.version("aider-chat"))' 2>/dev/null || true)
    if [ "$version" = latest ]; then
        # "aider-chat (0.86.2)": ask the index through the venv's pip, or a new one's
        [ -x "$prefix/bin/pip" ] || "$py" -m venv "$prefix" >&2
        version=$("$prefix/bin/pip" index versions aider-chat 2>/dev/null |
            awk 'NR == 1 { gsub(/[()]/, "", $2); print $2 }')
        if [ -z "$version" ]; then
            echo "install-agents.sh: pip could not say which version of aider-chat is the latest" >&2
            exit 1
        fi
    fi
    if [ "$have" != "$version" ]; then
        [ -n "$have" ] && echo "install-agents.sh: $bin is $have; installing $version" >&2
        [ -x "$prefix/bin/pip" ] || "$py" -m venv "$prefix" >&2
        "$prefix/bin/pip" install --quiet --disable-pip-version-check "aider-chat==$version" >&2
        have=$(installed "$bin")
        if [ "$have" != "$version" ]; then
            echo "install-agents.sh: installed $version, but $bin --version says ${have:-nothing}" >&2
            exit 1
        fi
    fi
    echo "aider $bin"
}

if ! command -v npm >/dev/null 2>&1; then
    echo "install-agents.sh: npm is needed (install nodejs and npm)" >&2
    exit 1
fi
install_one codex @openai/codex "${OWL_CODEX_VERSION:-$CODEX_PINNED}"
install_one gemini @google/gemini-cli "${OWL_GEMINI_VERSION:-$GEMINI_PINNED}"
install_one opencode opencode-ai "${OWL_OPENCODE_VERSION:-$OPENCODE_PINNED}"
install_one copilot @github/copilot "${OWL_COPILOT_VERSION:-$COPILOT_PINNED}"
install_one pi @mariozechner/pi-coding-agent "${OWL_PI_VERSION:-$PI_PINNED}"
install_aider "${OWL_AIDER_VERSION:-$AIDER_PINNED}"
