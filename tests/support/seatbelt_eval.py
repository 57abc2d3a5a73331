"""A small Seatbelt evaluator: parses a profile and decides an operation the way
Apple's sandbox does, as documented (Apple's "Sandbox Profile Language" notes and
the profiles shipped in /System/Library/Sandbox/Profiles):

- the rules are read in order and the LAST one that matches decides;
- a rule names operations, ``*`` ending a name matching all under it
  (``file-read*`` covers ``file-read-data`` and ``file-read-metadata``;
  ``default`` matches everything);
- the filters of one rule are alternatives (any of them); ``require-all`` needs
  all, ``require-any`` one; ``subpath`` is the path and all below it, ``literal``
  the path alone, ``regex`` a regular expression searched in the path.

Unknown rule or filter words raise, so a typo in the profile fails a test
rather than matching nothing."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

Sexp = Any  # str | list[Sexp]


def parse(text: str) -> list[Sexp]:
    """The profile's top-level forms, comments (``;`` to the line's end) dropped."""
    tokens = re.findall(r'#"(?:[^"\\]|\\.)*"|"(?:[^"\\]|\\.)*"|[()]|;[^\n]*|[^\s()";]+', text)
    stack: list[list[Sexp]] = [[]]
    for tok in tokens:
        if tok.startswith(";"):
            continue
        if tok == "(":
            stack.append([])
        elif tok == ")":
            done = stack.pop()
            stack[-1].append(done)
        elif tok.startswith('#"'):
            stack[-1].append(("regex-literal", _unquote(tok[1:])))
        elif tok.startswith('"'):
            stack[-1].append(("string", _unquote(tok)))
        else:
            stack[-1].append(tok)
    assert len(stack) == 1, "unbalanced parentheses"
    return stack[0]


def _unquote(tok: str) -> str:
    return re.sub(r"\\(.)", r"\1", tok[1:-1])


@dataclass
class Target:
    """What an operation is on: a path, a Mach service, an address..."""

    path: str | None = None
    is_dir: bool = False
    mach: str | None = None
    remote_ip: tuple[str, int] | None = None  # (address as the program wrote it, port)
    local_ip: tuple[str, int] | None = None  # what it binds or accepts on
    proto: str = "tcp"
    remote_unix: str | None = None
    local_unix: str | None = None
    sysctl: str | None = None
    same_sandbox: bool = True
    iokit: str | None = None
    # sandbox extensions the process holds for the path (macOS issues
    # com.apple.sandbox.pty for a pty the process opened itself)
    extensions: frozenset[str] = frozenset()
    extra: dict[str, str] = field(default_factory=dict)


@dataclass
class Rule:
    action: str  # "allow" | "deny"
    ops: list[str]
    filters: list[Sexp]


def rules(text: str) -> list[Rule]:
    out = []
    for form in parse(text):
        if form[0] == "version":
            continue
        action = form[0]
        assert action in ("allow", "deny"), form
        ops = [w for w in form[1:] if isinstance(w, str)]
        filters = [w for w in form[1:] if not isinstance(w, str)]
        out.append(Rule(action, ops, filters))
    return out


def _op_matches(pattern: str, op: str) -> bool:
    if pattern == "default":
        return True
    if pattern.endswith("*"):
        return op.startswith(pattern[:-1])
    return pattern == op


def _s(x: Sexp) -> str:
    assert isinstance(x, tuple) and x[0] in ("string", "regex-literal"), x
    return x[1]


def _path_filter(f: list[Sexp], path: str | None) -> bool:
    kind = f[0]
    if path is None:
        return False
    if kind == "subpath":
        p = _s(f[1])
        return path == p or path.startswith(p.rstrip("/") + "/")
    if kind == "literal":
        return path == _s(f[1])
    if kind in ("regex", "path-regex"):
        return re.search(_s(f[1]), path) is not None
    raise ValueError(f"unknown path filter {kind}")


# What Seatbelt's ``localhost`` stands for: 127.0.0.1 and ::1, no other spelling
# of the host (reported: ``(allow network-outbound (remote ip "localhost:*"))``
# lets 127.0.0.1 and ::1 through and not ::ffff:127.0.0.1). "localhost" as a
# target is 127.0.0.1.
LOCALHOST = ("127.0.0.1", "::1", "localhost")
IP_KINDS = ("ip", "ip4", "ip6", "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6")


def _ip(kind: str, spec: str, target: tuple[str, int], proto: str) -> bool:
    """A network address filter (``(remote ip "localhost:443")``): the host is
    ``*`` or ``localhost`` only, as sandbox-exec requires (it refuses any other
    "host must be * or localhost in network address"), the port ``*`` or a number."""
    host, _, port = spec.rpartition(":")
    if host not in ("*", "localhost") or not (port == "*" or port.isdigit()):
        raise ValueError(f"host must be * or localhost in network address: {spec!r}")
    addr, number = target
    v6 = ":" in addr
    if kind.endswith("4") and v6 or kind.endswith("6") and not v6:
        return False
    if kind.startswith(("tcp", "udp")) and not kind.startswith(proto):
        return False
    return (host == "*" or addr in LOCALHOST) and (port == "*" or int(port) == number)


def matches(f: Sexp, t: Target) -> bool:
    kind = f[0]
    if kind in ("subpath", "literal", "regex", "path-regex"):
        return _path_filter(f, t.path)
    if kind == "require-all":
        return all(matches(g, t) for g in f[1:])
    if kind == "require-any":
        return any(matches(g, t) for g in f[1:])
    if kind == "vnode-type":
        return f[1] == "DIRECTORY" and t.is_dir
    if kind == "extension":
        return _s(f[1]) in t.extensions
    if kind == "global-name":
        return t.mach == _s(f[1])
    if kind == "sysctl-name":
        return t.sysctl == _s(f[1])
    if kind == "sysctl-name-prefix":
        return t.sysctl is not None and t.sysctl.startswith(_s(f[1]))
    if kind == "target":
        return f[1] == "same-sandbox" and t.same_sandbox
    if kind == "iokit-registry-entry-class":
        return t.iokit == _s(f[1])
    if kind in ("remote", "local"):
        what = f[1]
        if what in IP_KINDS:
            addr = t.remote_ip if kind == "remote" else t.local_ip
            return addr is not None and _ip(what, _s(f[2]), addr, t.proto)
        if what == "unix-socket":
            path = t.remote_unix if kind == "remote" else t.local_unix
            if path is None:
                return False
            subs = f[2:]
            return not subs or any(_path_filter(g, path) for g in subs)
        raise ValueError(f"unknown network filter {f}")
    raise ValueError(f"unknown filter {kind}")


def decide(text: str, op: str, t: Target | None = None, **kw: Any) -> str:
    """ "allow" or "deny": the last rule that matches ``op`` on the target."""
    t = t or Target(**kw)
    result = None
    for rule in rules(text):
        if not any(_op_matches(p, op) for p in rule.ops):
            continue
        if rule.filters and not any(matches(f, t) for f in rule.filters):
            continue
        result = rule.action
    assert result is not None, "no (deny default) or (allow default) in the profile"
    return result


def allowed(text: str, op: str, **kw: Any) -> bool:
    return decide(text, op, **kw) == "allow"


def check(text: str) -> None:
    """Raise where sandbox-exec would refuse to compile: unbalanced forms,
    unknown words, an address that is not ``*`` or ``localhost`` with a port."""

    def walk(f: Sexp) -> None:
        if isinstance(f, list) and f and f[0] in ("remote", "local") and f[1] in IP_KINDS:
            _ip(f[1], _s(f[2]), ("127.0.0.1", 1), "tcp")
        elif isinstance(f, list):
            for g in f[1:]:
                walk(g)

    for rule in rules(text):
        for f in rule.filters:
            matches(f, Target())  # unknown filter words raise
            walk(f)
