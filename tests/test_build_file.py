"""BUILD lists every source, test and entry point, and names no missing file.

Bazel cannot fetch its rules offline here, so the file is checked by
evaluating it (Starlark is a Python subset) with recording stand-ins.
"""

import glob
import os

import pytest

from tests.conftest import REPO_ROOT

tomllib = pytest.importorskip("tomllib")


def _targets():
    targets = []

    def rule(kind):
        return lambda **kwargs: targets.append(dict(kwargs, kind=kind))

    scope = {"package": lambda **k: None, "load": lambda *a, **k: None, "requirement": lambda name: f"@pip//{name}",
             "glob": lambda patterns: [], **{kind: rule(kind) for kind in ("py_library", "py_test", "py_binary")}}
    with open(os.path.join(REPO_ROOT, "BUILD")) as f:
        exec(compile(f.read(), "BUILD", "exec"), scope)
    return targets


def _repo_files(pattern):
    return {os.path.relpath(p, REPO_ROOT) for p in glob.glob(os.path.join(REPO_ROOT, pattern), recursive=True)}


def test_every_named_file_exists():
    for target in _targets():
        for path in target.get("srcs", []) + ([target["main"]] if "main" in target else []):
            assert os.path.isfile(os.path.join(REPO_ROOT, path)), f"{target['name']}: {path} does not exist"


def test_every_source_file_is_in_a_library_or_binary():
    listed = {p for t in _targets() if t["kind"] in ("py_library", "py_binary") for p in t["srcs"]}
    sources = _repo_files("keras_transformer/**/*.py") | _repo_files("recipes/**/*.py")
    assert sources - listed == set(), "missing from BUILD srcs"


def test_every_test_file_has_a_py_test():
    tested = {t["main"] for t in _targets() if t["kind"] == "py_test"}
    assert _repo_files("tests/**/test_*.py") - tested == set(), "missing py_test targets"


def test_every_entry_point_has_a_py_binary():
    with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    binaries = {t["name"]: t for t in _targets() if t["kind"] == "py_binary"}
    for name, entry in scripts.items():
        module = entry.split(":")[0]
        assert name in binaries, f"no py_binary {name}"
        assert binaries[name]["main"] == module.replace(".", "/") + ".py"


def test_target_names_are_unique():
    names = [t["name"] for t in _targets()]
    assert len(names) == len(set(names))
