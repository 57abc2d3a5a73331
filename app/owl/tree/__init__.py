"""The process tree of a Run: sweep, freeze, thaw, term, kill (per OS).

One interface, one backend module per platform, chosen at import the way
psutil chooses its own: ``linux`` (/proc, pidfds, child subreaper),
``macos`` (psutil, taskpolicy), ``posix`` (psutil only, anywhere else).
This package knows nothing of Jobs or Runs beyond a tag in the environment.

    become_subreaper()
    popen = spawn(argv, cwd=..., env={..., "OWL_RUN_ID": "42"},
                  stdout=log, stderr=log, nice=10)
    tree = ProcessTree(("OWL_RUN_ID", "42"), popen.pid)
    tree.freeze(); tree.thaw(); tree.term(); tree.kill()
    reap_orphans(lambda pid: pid in popens_by_pid)   # on every tick
    own(popen)          # a Popen in a new session started without spawn()

After a crash, ``kill_processes(find_survivors("OWL_RUN_ID", run_ids,
identities, instance=("OWL_INSTANCE", this_home)))``.

Where the user has a delegated cgroup v2, ``RunGroup.make(instance, run)``
gives the Run a cgroup: pass it to spawn() and ProcessTree() alike.
``KernelCaps.make(group, instance, run, memory, processes)`` writes the Run's
caps where the kernel can hold them (pass its ``joins`` to spawn() as
``also``); ``resident``/``proportional`` sum what a Run's processes hold.

A process the system will not let us signal (EPERM: it became root, as
``sudo`` does) never raises: it is left alone, does not keep the tree
``alive()``, and ``tree.refused()`` names it.
"""

from __future__ import annotations

import os as _os

from ._platform import backend
from .process_tree import ProcessTree
from .survivors import end_processes, find_survivors, kill_processes
from .launch import SPAWN_LOCK, become_subreaper, own, reap_orphans, spawn
from .cgroup import RunGroup
from .cgroup_caps import KernelCaps
from .usage import proportional, resident, swapping, total_memory
from .pyhelper import command as helper_command

# Run a short command under this script (see sweeper.py) and nothing it starts outlives it.
SWEEPER = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "sweeper.py")

BACKEND: str = backend.NAME

__all__ = [
    "BACKEND",
    "KernelCaps",
    "proportional",
    "resident",
    "swapping",
    "total_memory",
    "SPAWN_LOCK",
    "SWEEPER",
    "backend",
    "ProcessTree",
    "RunGroup",
    "become_subreaper",
    "end_processes",
    "find_survivors",
    "helper_command",
    "kill_processes",
    "own",
    "reap_orphans",
    "spawn",
]
