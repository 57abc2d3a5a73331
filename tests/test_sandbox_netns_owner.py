"""The Run's network namespace is joined through the user namespace that owns
it, however far bwrap's set-up has gone.

For an ordinary user, bwrap maps the user to 0 in the user namespace it makes
(to mount ``/dev``'s devpts), then makes a second one inside it that maps the
user back, and only then waits on ``--block-fd``. A helper that joined the
child's own ``/proc/PID/ns/user`` after that got the second, which has no
rights over the network namespace: setns failed with EPERM, and the Run had no
network (seen once, when bwrap's set-up outran the daemon). Here bwrap is let
run to its wait first, as the user, and the routes' holder (``netroutes.py``,
as the daemon starts it) is told the namespaces both ways.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from support.need import programs
from support.users import second_user

SANDBOX = Path(__file__).resolve().parent.parent / "app" / "owl" / "sandbox"

AS_USER = r"""
import json, os, subprocess, sys, time
here = sys.argv[1]
sys.path.insert(0, here)
import netproc

def holder(user, net):
    # netroutes.py told USERNS NETNS, as netns.py tells it: (what it said, its stderr)
    ready_r, ready_w = os.pipe()
    hold_r, hold_w = os.pipe()
    argv = [sys.executable, "-I", "-S", f"{here}/netroutes.py", str(ready_w), str(hold_r)]
    p = subprocess.Popen(argv, pass_fds=(ready_w, hold_r, user, net), stderr=subprocess.PIPE)
    os.close(ready_w)
    os.close(hold_r)
    os.write(hold_w, f"/proc/self/fd/{user} /proc/self/fd/{net}\n".encode())
    said = os.read(ready_r, 16).decode()  # "" once it has ended without a word
    os.close(ready_r)
    os.close(hold_w)
    return said, p.communicate(timeout=60)[1].decode()

info_r, info_w = os.pipe()
block_r, block_w = os.pipe()
argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-net",
        "--info-fd", str(info_w), "--block-fd", str(block_r), "--", "true"]
bwrap = subprocess.Popen(argv, pass_fds=(info_w, block_r))
os.close(info_w)
os.close(block_r)
info = b""
while chunk := os.read(info_r, 4096):
    info += chunk
pid = json.loads(info)["child-pid"]
# bwrap's child has made its second user namespace once its map, read from
# here, takes the user to itself (the first takes it to 0)
deadline = time.monotonic() + 60
while True:
    with open(f"/proc/{pid}/uid_map") as f:
        first = f.read().split()[:1]
    if first and first != ["0"]:
        break
    assert time.monotonic() < deadline, f"bwrap's child kept its map {first}"
    time.sleep(0.01)
own = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY)
net, owner = netproc.namespaces(pid)
out = {"own": holder(own, net), "owner": None if owner is None else holder(owner, net)}
os.write(block_w, b"x")
out["bwrap"] = bwrap.wait(timeout=60)
print(json.dumps(out))
"""


def test_an_ordinary_users_run_is_joined_through_its_network_namespaces_owner() -> None:
    programs("bwrap", "setpriv")
    with second_user("nso") as user:
        folder = Path(tempfile.mkdtemp(prefix="owl-nso-", dir="/var/tmp"))
        try:
            folder.chmod(0o755)
            for name in ("netproc.py", "netroutes.py"):
                shutil.copy(SANDBOX / name, folder / name)
                (folder / name).chmod(0o644)
            (folder / "as_user.py").write_text(AS_USER)
            as_user = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}"]
            done = subprocess.run(
                [
                    *as_user,
                    "--clear-groups",
                    sys._base_executable,
                    str(folder / "as_user.py"),
                    str(folder),
                ],
                capture_output=True,
                text=True,
                timeout=240,
                cwd=folder,
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    # the mechanism: the child's own user namespace is the second, and no way in
    said, err = out["own"]
    assert said == "" and "Operation not permitted" in err, out
    # the way taken: the namespace's owner, which lets the holder in
    assert out["owner"] is not None, out
    said, err = out["owner"]
    assert said.startswith("ready"), out
    assert out["bwrap"] == 0, out


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))
