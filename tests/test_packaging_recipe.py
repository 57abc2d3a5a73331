"""The macOS recipe in packaging/README.md says what the build makes."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

RECIPE = Path(__file__).resolve().parent.parent / "packaging" / "README.md"


def _block(text: str, name: str) -> str:
    m = re.search(rf"cat > {re.escape(name)} <<'PY'\n(.*?)\nPY\n", text, re.S)
    assert m, f"no {name} in the recipe"
    return m.group(1)


def test_the_recipe_installs_the_wheel_by_its_real_name():
    text = RECIPE.read_text()
    mac = text[text.index("## macOS") :]
    assert "dist/owl_away-*.whl" in mac and "dist/owl-*.whl" not in text
    name = re.search(
        r'^name = "([^"]+)"', (RECIPE.parent.parent / "pyproject.toml").read_text(), re.M
    )
    assert name and name.group(1).replace("-", "_") == "owl_away"


def test_the_bundles_script_and_setup_are_python_that_name_real_packages():
    text = RECIPE.read_text()
    ast.parse(_block(text, "owl_app.py"))
    setup = _block(text, "setup_app.py")
    tree = ast.parse(setup)
    call = next(
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup"
    )
    options = ast.literal_eval(next(k.value for k in call.keywords if k.arg == "options"))
    packages = options["py2app"]["packages"]
    assert "owl" in packages
    for package in packages:
        assert importlib.util.find_spec(package) is not None, package
