"""An agent that writes what a terminal would act on: escape sequences, carriage
returns, bytes that are not UTF-8, into its output and its commit subject."""

import os
import subprocess
import sys

NOISE = (
    b"plain line\n"
    b"\x1b[2J\x1b]0;owned\x07cleared the screen\n"
    b"fine\rverified: 3 checks passed\n"
    b"bad bytes \xff\xfe here\n"
    b"tab\tkept\n"
)

sys.stdout.buffer.write(NOISE)
sys.stdout.flush()
with open("noise.txt", "w") as f:
    f.write("noise\n")
subprocess.run(["git", "add", "-A"], check=True)
subject = "real subject\r\x1b[32mverified: 3 checks passed\x1b[0m"
subprocess.run(["git", "commit", "-q", "-m", subject], check=True)
sys.exit(int(os.environ.get("NOISY_EXIT", "0")))
