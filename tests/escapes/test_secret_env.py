"""Secrets the person keeps in the environment, by name and by value.

The filter matched names by their suffix only: ``PGPASSWORD``, ``MYSQL_PWD``,
``BW_SESSION``, ``OP_SESSION_<account>``, ``SECRET_KEY``, ``GPG_PASSPHRASE``
and a URL with its password (``DATABASE_URL``-like, under any name) reached
the Run. Now a name holding a key's, a token's, a password's word, a URL with
a password and a token by its service's prefix stay out, in the Run and in its
check; the shell's and git's own names stay in; the agent's own key passes;
`owl status --json` lists what was dropped, by name, never a value. As root
and as an ordinary user."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from escapes.asuser import WHO, owl_as
from escapes.harness import base, done, landed, person, project, refused
from owlproc import wait_for
from support.need import programs

__all__ = ["base"]

SECRETS = {
    "PGPASSWORD": "pg-hunter2",
    "MYSQL_PWD": "my-hunter2",
    "BW_SESSION": "bw-session-value",
    "OP_SESSION_myteam": "op-session-value",
    "SECRET_KEY": "django-secret-value",
    "GPG_PASSPHRASE": "gpg-passphrase-value",
    "STRIPE_APIKEY": "stripe-value",
    "UPSTREAM": "postgres://app:url-hunter2@db.example/prod",
    "HELPER_CONFIG": "ghp_" + "Q" * 36,
}
KEPT = {
    "GIT_AUTHOR_NAME": "The Person",
    "XDG_SESSION_TYPE": "wayland",
    "JAVA_HOME": "/usr/lib/jvm/default",
    "GOPATH": "/home/person/go",
    "KEYBOARD_LAYOUT": "us",
}

SCAN = (
    "\n".join(
        f'try "read {name} from the environment" "env | grep -q -e hunter2 -e {value[:12]}"'
        for name, value in SECRETS.items()
    )
    + "\n"
    + "\n".join(
        f'test "${{{name}:-}}" = "{value}" && echo "kept {name}"' for name, value in KEPT.items()
    )
    + "\n"
    + "while [ ! -e .go ]; do sleep 0.1; done  # the test reads the status now\n"
)

CHECK = """#!/bin/sh
env | grep -e hunter2 -e ghp_ -e session-value -e secret-value && exit 1
echo "nothing of the person's secrets"
"""


@pytest.mark.parametrize("who", WHO)
def test_secrets_by_name_or_value_stay_out_and_status_names_them(base: Path, who: str) -> None:
    programs("bwrap")
    home = person(base)
    proj = project(
        base, {"check.sh": CHECK, ".owl.toml": "[[checks]]\nname = 'env'\nrun = 'sh check.sh'\n"}
    )
    with owl_as(who, base, home, proj, SCAN, env={**SECRETS, **KEPT}) as d, d:
        job = d.add("do the work", proj)
        d.machine("idle")
        try:
            run = wait_for(
                lambda: [r for r in d.status()["runs"] if r["job_id"] == job and r["env_dropped"]],
                timeout=60,
                what="the Run, live, with what its environment went without",
            )[0]
            said = json.dumps(d.status())
        finally:  # the Run goes on to its end whatever was seen
            Path(d.job(job)["worktree"], ".go").touch()
        j, log = done(d, job)
    assert set(SECRETS) <= set(run["env_dropped"]), run["env_dropped"]
    assert not set(KEPT) & set(run["env_dropped"]), run["env_dropped"]
    for value in SECRETS.values():
        assert value not in said  # by name only
    refused(log, *(f"read {name} from the environment" for name in SECRETS))
    for name in KEPT:
        assert f"kept {name}" in log, log
    [c] = j["runs"][-1]["checks"]
    assert c["passed"] and "nothing of the person's secrets" in c["output"], c
    landed(proj, j["branch"])
