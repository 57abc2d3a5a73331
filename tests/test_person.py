"""The person the idle tests stand at the machine (`support.person`): there
without a gap however slowly programs start, and gone once they leave.

Whether the person is there is what those tests are about; a stand-in that
started `xdotool` for each move was once still for longer than `idle.after`
under the suite's load, and Owl, rightly, took the machine as idle."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from support.need import programs
from support.person import Person

from display import virtual_display


def test_the_person_moves_without_a_gap_when_starting_a_program_is_slow(tmp_path: Path) -> None:
    programs("Xvfb", "xdotool")
    slow = tmp_path / "bin"
    slow.mkdir()
    # every program the person might start takes 2 s to begin: a busy machine, at its worst
    for name in ("xdotool", "python3"):
        real = shutil.which(name)
        assert real is not None
        (slow / name).write_text(f'#!/bin/sh\nsleep 2\nexec {real} "$@"\n')
        (slow / name).chmod(0o755)
    with virtual_display() as desk:
        env = dict(desk, PATH=f"{slow}{os.pathsep}{desk['PATH']}")
        with Person(env, every=0.1) as person:
            time.sleep(1.5)
            assert person.moves >= 10, person.moments
        assert person.longest_gap() < 0.5, person.longest_gap()
        # gone: no move after leaving
        moves = person.moves
        time.sleep(0.3)
        assert person.moves == moves and person.left_at is not None
