"""docs/configuration.md says every key with its default: its TOML is a
config Owl loads, it names every key `owl config show` prints for a fresh
home, and what it gives each is the default (so the page cannot drift from
the code, nor offer a value Owl would refuse)."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path
from typing import Any

from owl.settings import config as configmod

PAGE = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


def blocks() -> list[str]:
    return re.findall(r"```toml\n(.*?)```", PAGE.read_text(), flags=re.DOTALL)


def keys_of(doc: dict[str, Any], prefix: str = "") -> set[str]:
    """Every dotted key of a document, a table's keys named under it."""
    out: set[str] = set()
    for key, value in doc.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            out |= keys_of(value, f"{dotted}.")
        else:
            out.add(dotted)
    return out


def test_the_page_names_every_key_owl_config_show_prints_with_its_default() -> None:
    page = tomllib.loads(blocks()[0])
    shown = configmod.effective_document(configmod.Config())
    assert keys_of(page) == keys_of(shown), "the page and `owl config show` name other keys"
    loaded = configmod.effective_document(configmod.from_dict(page, str(PAGE)))
    if sys.platform.startswith("linux"):
        assert loaded == shown  # the page's values are the defaults, as Owl reads them
    else:  # the sandbox's default mode is the platform's
        assert {**loaded, "sandbox": None} == {**shown, "sandbox": None}


def test_the_pages_project_example_is_a_config_owl_loads() -> None:
    (example,) = [tomllib.loads(b) for b in blocks()[1:]]
    project = next(iter(example["projects"]))
    assert configmod.from_dict(example, str(PAGE)).projects[project]["agent"] == "codex"
