"""The smallest bwrap sandbox the tests start by hand: the host's filesystem
read-only, a /dev and a /proc of its own, a PID namespace of its own."""

HOST_READ_ONLY = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
MINIMAL = ["bwrap", *HOST_READ_ONLY, "--unshare-pid", "--"]
