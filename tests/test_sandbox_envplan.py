"""The environment a contained Run starts with: no secret by name or by value, pure."""

from __future__ import annotations

import string

from hypothesis import given
from hypothesis import strategies as st
from owl.sandbox import envplan as E

SECRETS = {
    "PGPASSWORD": "hunter2",
    "MYSQL_PWD": "hunter2",
    "BW_SESSION": "abc",
    "OP_SESSION_my_team": "abc",
    "SECRET_KEY": "abc",
    "GPG_PASSPHRASE": "abc",
    "DATABASE_URL": "sqlite:///x",
    "STRIPE_KEY": "abc",
    "APIKEY": "abc",
    "npm_config__authToken": "abc",
    "HOMEBREW_GITHUB_API_TOKEN": "abc",
    "SMTP_PASS": "abc",
    "GITHUB_PAT": "abc",
    "MY_CREDENTIALS": "abc",
    "REGISTRY_AUTH": "abc",
    "SESSION_COOKIE": "abc",
    "SENTRY_DSN": "abc",
}
KEPT = {
    "PWD": "/home/me/code",
    "OLDPWD": "/home/me",
    "GIT_AUTHOR_NAME": "Me",
    "GIT_AUTHOR_EMAIL": "me@example.com",
    "XDG_SESSION_TYPE": "wayland",
    "DESKTOP_SESSION": "gnome",
    "JAVA_HOME": "/usr/lib/jvm/default",
    "GOPATH": "/home/me/go",
    "KEYBOARD_LAYOUT": "us",
    "TOKENIZERS_PARALLELISM": "false",
    "SSH_ASKPASS": "/usr/bin/ksshaskpass",
    "PATH": "/usr/local/bin:/usr/bin",
    "HTTP_PROXY": "http://proxy.example:3128",
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "core.editor",
    "GIT_CONFIG_VALUE_0": "vi",
    "NODE_OPTIONS": "--max-old-space-size=4096",
    "LANG": "C.UTF-8",
}
VALUES = {
    "DEPLOY": "postgres://app:pw@db.example/prod",
    "CACHE": "redis://:hunter2@127.0.0.1:6379/0",
    "UPSTREAM": "https://me:ghp_abcdefabcdefabcdefabcdefabcdef@github.com/me/x.git",
    "GH": "ghp_" + "a1" * 18,
    "LAB": "glpat-" + "x" * 20,
    "SLACK": "xoxb-1234567890-abcdef",
    "OPENAI": "sk-proj-" + "Ab9" * 10,
    "STRIPE": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "AMAZON": "AKIAIOSFODNN7EXAMPLE",
    "GOOG": "AIza" + "S" * 35,
    "NPMJS": "npm_" + "a" * 36,
    "PYPI_UP": "pypi-AgEIcHlwaS5vcmcCJDA",
    "HEADER": "Authorization: Bearer ghs_" + "Z" * 36,
    "PEM": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n",
}


def plan(env: dict[str, str], kept: tuple[str, ...] = ()) -> tuple[set[str], dict[str, str]]:
    drop, set_ = E.env_plan(env, kept, "/run/user/1000")
    return set(drop), dict(set_)


def test_the_secrets_a_person_keeps_in_the_environment_are_dropped_by_name():
    dropped, _ = plan({**SECRETS, **KEPT})
    assert dropped == set(SECRETS), dropped ^ set(SECRETS)


def test_a_password_in_a_url_or_a_token_by_its_prefix_is_dropped_by_value():
    dropped, _ = plan({**VALUES, **KEPT})
    assert dropped == set(VALUES), dropped ^ set(VALUES)


def test_what_only_looks_like_a_token_is_kept():
    env = {
        "A": "https://example.com:8443/path?mail=me@example.com",  # a port, no password
        "B": "ssh://git@github.com/me/x.git",  # a user, no password
        "C": "/opt/desk-top/sk-learn",  # "sk-" inside a word, too short a body
        "D": "AKIA",
        "E": "https://user:@host/",  # an empty password is none
    }
    dropped, _ = plan(env)
    assert dropped == set(), dropped


def test_the_agents_own_and_the_persons_names_pass_whatever_they_hold():
    env = {"ANTHROPIC_API_KEY": "sk-ant-" + "k" * 30, "MY_TOKEN": "ghp_" + "x" * 36}
    dropped, _ = plan(env, kept=("ANTHROPIC_API_KEY", "MY_TOKEN"))
    assert dropped == set()
    # the Run's own tags are never dropped
    dropped, _ = plan({"OWL_RUN_ID": "7", "OWL_INSTANCE": "ab12"})
    assert dropped == set()


def test_a_secret_in_gits_environment_config_takes_every_pair_with_it():
    env = {
        "GIT_CONFIG_COUNT": "2",
        "GIT_CONFIG_KEY_0": "core.editor",
        "GIT_CONFIG_VALUE_0": "vi",
        "GIT_CONFIG_KEY_1": "remote.origin.url",
        "GIT_CONFIG_VALUE_1": "https://me:hunter2@example.com/x.git",
    }
    dropped, set_ = plan(env)
    assert dropped == set(env)
    # Owl's own pairs numbered from 0 again: git refuses a gap
    assert set_["GIT_CONFIG_KEY_0"] == "commit.gpgSign" and set_["GIT_CONFIG_COUNT"] == "2"
    # with no secret in them, the person's pairs stay and Owl's come after
    dropped, set_ = plan(
        {k: v for k, v in env.items() if k.endswith("0")} | {"GIT_CONFIG_COUNT": "1"}
    )
    assert dropped == set() and set_["GIT_CONFIG_KEY_1"] == "commit.gpgSign"


# Words that can spell no secret's word: no A, E, K, P, S, T or W (KEY, TOKEN,
# SECRET, PASS..., PWD, AUTH, AWS, PAT, DSN, COOKIE, CREDENTIAL all need one).
SAFE_LETTERS = "BCDFGHIJLMNOQRUVXYZ"
safe_word = st.text(SAFE_LETTERS + string.digits, min_size=1, max_size=8)
word = st.text(string.ascii_uppercase + string.digits, min_size=1, max_size=8)
TERMS = ("KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL")


@given(
    before=st.lists(word, max_size=3),
    after=st.lists(word, max_size=3),
    term=st.sampled_from(TERMS),
    prefix=st.sampled_from(("", "MY", "API", "PG", "X9")),
    plural=st.booleans(),
    lower=st.booleans(),
)
def test_any_name_with_a_word_ending_in_a_secrets_word_is_dropped(
    before, after, term, prefix, plural, lower
):
    name = "_".join([*before, prefix + term + ("S" if plural else ""), *after])
    name = name.lower() if lower else name
    assert E.secret_name(name), name
    assert name in plan({name: "x"})[0]
    assert name not in plan({name: "x"}, kept=(name,))[0]


@given(words=st.lists(safe_word, min_size=1, max_size=4), value=st.text(SAFE_LETTERS, max_size=40))
def test_a_name_of_other_words_with_a_plain_value_is_kept(words, value):
    name = "_".join(words)
    assert not E.secret_name(name), name
    assert plan({name: value})[0] == set()


@given(
    scheme=st.from_regex(r"[a-z][a-z0-9+.-]{0,8}", fullmatch=True),
    user=st.from_regex(r"[A-Za-z0-9._~-]{0,8}", fullmatch=True),
    password=st.from_regex(r"[A-Za-z0-9._~%!$&'()*+,;=-]{1,16}", fullmatch=True),
    host=st.from_regex(r"[a-z0-9.-]{1,16}(:[0-9]{1,5})?", fullmatch=True),
    around=st.tuples(st.text(SAFE_LETTERS + " ,;", max_size=10), st.text(max_size=10)),
)
def test_any_url_with_a_password_is_dropped_wherever_it_sits_in_a_value(
    scheme, user, password, host, around
):
    value = f"{around[0]} {scheme}://{user}:{password}@{host}/path {around[1]}"
    assert E.secret_value(value), value
    assert "ANY" in plan({"ANY": value})[0]


@given(
    prefix=st.sampled_from(("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-")),
    body=st.text(string.ascii_letters + string.digits, min_size=36, max_size=60),
    before=st.sampled_from(("", "token=", "Bearer ", "x:", '{"t":"')),
)
def test_any_value_holding_a_token_by_its_prefix_is_dropped(prefix, body, before):
    assert E.secret_value(before + prefix + body)


@given(
    prefix=st.sampled_from(("xoxb-", "xoxp-", "xoxa-", "sk-", "sk-ant-", "pypi-", "sk_live_")),
    body=st.text(string.ascii_letters + string.digits, min_size=24, max_size=60),
)
def test_slack_openai_anthropic_pypi_and_stripe_tokens_are_dropped(prefix, body):
    assert E.secret_value(prefix + body)


@given(kind=st.sampled_from(("AKIA", "ASIA")), body=st.from_regex(r"[A-Z0-9]{16}", fullmatch=True))
def test_aws_access_key_ids_are_dropped(kind, body):
    assert E.secret_value(kind + body)
