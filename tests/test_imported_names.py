"""Every name imported from keras_transformer exists, in every file, read without running it.

The benchmarks that need `.[bench]` (torch, transformers, sacremoses) and their tests are skipped where those
packages are missing, so a name moved in the package would break them unseen (bench/baseline_bleu.py once
imported ``read_text`` from where it no longer was). This reads the imports of every Python file of the
repository, those inside functions too, and looks each name up in the source of the module it names.
"""

import ast
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = "keras_transformer"
SOURCES = ("bench", "recipes", "tests", PACKAGE)


def _module_path(module: str):
    """keras_transformer.a.b -> keras_transformer/a/b.py or keras_transformer/a/b/__init__.py (None if neither)."""
    parts = module.split(".")
    if parts[:2] == [PACKAGE, "recipes"]:  # installed from the top-level recipes/ (pyproject.toml's package-dir)
        parts = parts[1:]
    base = REPO.joinpath(*parts)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _bound_names(path: pathlib.Path) -> set:
    """Names a module binds at its top level (in if/try blocks too): defs, classes, assignments, imports."""
    names = set()

    def visit(statements):
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(node, block, []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return names


def _imports(path: pathlib.Path):
    """(line, module, name or None) for each import of a keras_transformer module or name in the file."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name, None) for a in node.names if a.name.split(".")[0] == PACKAGE)
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == PACKAGE:
            yield from ((node.lineno, node.module, a.name) for a in node.names if a.name != "*")


def _files():
    return sorted(p for top in SOURCES for p in (REPO / top).rglob("*.py"))


def test_the_files_are_found():
    files = _files()
    assert REPO / "bench" / "baseline_bleu.py" in files and REPO / "tests" / "bench" / "test_marian.py" in files
    assert sum(1 for f in files for _ in _imports(f)) > 500


def _missing(top: str):
    """'file:line: what is missing' for each import under REPO/top of a keras_transformer module or name that
    does not exist."""
    missing, bound = [], {}
    for path in (p for p in _files() if p.relative_to(REPO).parts[0] == top):
        for line, module, name in _imports(path):
            where = f"{path.relative_to(REPO)}:{line}"
            source = _module_path(module)
            if source is None:
                missing.append(f"{where}: no module {module}")
            elif name is not None and _module_path(f"{module}.{name}") is None:
                if name not in bound.setdefault(source, _bound_names(source)):
                    missing.append(f"{where}: {module} has no {name}")
    return missing


@pytest.mark.parametrize("top", SOURCES)
def test_every_imported_name_exists(top):
    assert _missing(top) == []


def test_a_moved_name_is_reported(tmp_path, monkeypatch):
    """The check itself: the import bench/baseline_bleu.py had is found, with its file and line."""
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    (tmp_path / PACKAGE / "tasks").mkdir(parents=True)
    (tmp_path / PACKAGE / "tasks" / "__init__.py").write_text("")
    (tmp_path / PACKAGE / "tasks" / "metric.py").write_text("TOKENIZED_BLEU = {}\ntry:\n    import x as y\n"
                                                            "except ImportError:\n    y = None\n")
    (tmp_path / PACKAGE / "__init__.py").write_text("")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "script.py").write_text(
        "import os\nfrom keras_transformer.tasks.metric import TOKENIZED_BLEU, read_text, y\n"
        "def main():\n    from keras_transformer.tasks import metric, gone\n    import keras_transformer.nothing\n")
    assert _missing("bench") == ["bench/script.py:2: keras_transformer.tasks.metric has no read_text",
                                 "bench/script.py:4: keras_transformer.tasks has no gone",
                                 "bench/script.py:5: no module keras_transformer.nothing"]
