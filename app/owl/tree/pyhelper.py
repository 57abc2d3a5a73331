"""How Owl starts its own small helper scripts (the Run's reaper, git's sweeper):
an interpreter invocation that works in a plain Python and inside Owl.app.

A plain Python: ``sys.executable -I -S SCRIPT``. ``-I`` ignores every PYTHON*
variable of the environment (the person's PYTHONPATH, a planted
PYTHONSTARTUP) and puts neither the script's folder nor the working folder
(the agent's worktree) on ``sys.path``; ``-S`` skips ``site``: a few ms.

Inside a py2app bundle ``sys.executable`` (``Contents/MacOS/python``) finds
its standard library only through PYTHONHOME/PYTHONPATH: the bundle's main
executable sets them for itself, and ``-I`` (or ``-E``) throws them away,
so the helper dies before its first line ("No module named 'encodings'"),
and no Run or git call starts. So there the helper starts:

- without ``-I``/``-E``, with an environment of exactly two PYTHON*
  variables, PYTHONHOME and PYTHONPATH, taken from this process (every other
  PYTHON* variable of the caller's environment is left out, so none of them
  reaches the interpreter);
- with ``-s`` (no user site), ``-S`` (no site) and ``-P`` (not the working
  folder, the agent's worktree, on ``sys.path``): what ``-I`` gave besides;
- through a few lines of ``-c`` that put back the caller's own PYTHON*
  variables, take the two away again, and run the script as ``__main__``: what
  the helper starts (the agent) has the caller's environment, not the bundle's.

Not the bundle's main executable with ``-m`` (as the watchdog starts): that
would import Owl and the bundle's boot script before every Run and every git
call, where these helpers need the standard library alone.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from owl import bundle

# Run in the child: argv is [-c, N, k1, v1, ..., kN, vN, SCRIPT, ARGS...].
BOOT = (
    "import os,sys\n"
    "a=sys.argv;n=int(a[1]);e=os.environ\n"
    "e.pop('PYTHONHOME',None);e.pop('PYTHONPATH',None)\n"
    "e.update(zip(a[2:2+2*n:2],a[3:3+2*n:2]))\n"
    "s=a[2+2*n];sys.argv=a[2+2*n:]\n"
    "g={'__name__':'__main__','__file__':s,'__builtins__':__builtins__}\n"
    "exec(compile(open(s,'rb').read(),s,'exec'),g)\n"
)

_inside: dict[str, bool] = {}


def in_bundle(executable: str | None = None) -> bool:
    """Whether this interpreter is an app bundle's (looked at once)."""
    exe = executable or sys.executable
    if exe not in _inside:
        _inside[exe] = bundle.app_bundle(exe) is not None
    return _inside[exe]


def bundle_env() -> dict[str, str]:
    """PYTHONHOME and PYTHONPATH as this bundle's interpreter needs them: where
    this very process found its library (its prefix, the folders it imports
    from), whatever its stub set and whether or not that is still in os.environ."""
    home = sys.prefix
    if sys.exec_prefix != sys.prefix:
        home += os.pathsep + sys.exec_prefix
    path = os.pathsep.join(p for p in sys.path if os.path.isabs(p))
    return {"PYTHONHOME": home, "PYTHONPATH": path}


def command(
    script: str, args: list[str], env: Mapping[str, str], executable: str | None = None
) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) that run ``script ARGS`` as a helper, the script's
    own children getting ``env`` as it is."""
    exe = executable or sys.executable
    if not in_bundle(exe):
        return [exe, "-I", "-S", script, *args], dict(env)
    own = [(k, v) for k, v in env.items() if k.startswith("PYTHON")]
    child = {k: v for k, v in env.items() if not k.startswith("PYTHON")}
    child.update(bundle_env())
    pairs = [x for kv in own for x in kv]
    return [exe, "-s", "-S", "-P", "-c", BOOT, str(len(own)), *pairs, script, *args], child
