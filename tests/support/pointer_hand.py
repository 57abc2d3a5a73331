"""The hand of `person.Person`: moves the X pointer every EVERY seconds, from
one process and one X connection, and prints the moment (CLOCK_MONOTONIC) of
each move once the X server has it, until its input closes.

    python pointer_hand.py EVERY X0 X1 Y
"""

from __future__ import annotations

import os
import select
import sys
import time

from Xlib import X, display
from Xlib.ext import xtest


def main() -> None:
    every, x0, x1, y = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    try:
        os.nice(-10)  # a person's hand is not slowed by the machine's load
    except OSError:
        pass  # not allowed here: the same hand, at the load's pace
    d = display.Display()
    n = 0
    while True:
        xtest.fake_input(d, X.MotionNotify, x=x1 if n % 2 else x0, y=y)
        d.sync()  # the server has it: the move is input from now on
        print(f"{time.monotonic():.6f}", flush=True)
        n += 1
        if select.select([sys.stdin], [], [], every)[0]:
            return  # input closed: the person leaves


if __name__ == "__main__":
    main()
