"""The package's import graph is layered: no cycles, and no import that runs up a floor (docs/architecture.md).

Every import counts, those inside functions too; only optional packages (tensorflow_text, ctranslate2, ...)
may be imported inside functions, and they are not the package's own modules.
"""

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "keras_transformer"

# The floors, lowest first: a module may import from its own floor and the floors below it, never above.
FLOORS = (
    ("", "config", "recipe_keys", "workdir", "tf_setup", "_keras_compat", "precision"),  # "": the __init__
    ("layers", "model", "losses", "schedules", "recipes"),  # recipes: the top-level recipes/, installed in the package
    ("data", "decoding", "checkpoints"),
    ("serving", "engines", "scoring", "plotting"),
    ("artifacts",),
    ("tasks",),
    ("training", "inference"),
    ("pipeline",),
    ("cli",),
)
FLOOR = {name: level for level, names in enumerate(FLOORS) for name in names}
MAX_LINES = 400


def _modules():
    found = {".".join(p.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__"): p
             for p in ROOT.rglob("*.py")}
    found.update({f"keras_transformer.{'.'.join(p.relative_to(ROOT.parent).with_suffix('').parts)}".removesuffix(
        ".__init__"): p for p in (ROOT.parent / "recipes").rglob("*.py")})  # keras_transformer.recipes
    return found


def _edges(modules):
    """{module: {module it imports}}, package-own modules only, a submodule's import of its parent left out."""
    edges = {m: set() for m in modules}
    for m, path in modules.items():
        package = m if path.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for target in names:
                if target in modules and target != m and not m.startswith(target + "."):
                    edges[m].add(target)
    return edges


def _floor(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    if top not in FLOOR:
        pytest.fail(f"{module}: on no floor; add {top!r} to FLOORS in tests/test_layering.py and "
                    "docs/architecture.md")
    return FLOOR[top]


def test_every_module_is_on_a_floor_and_imports_only_downwards():
    modules = _modules()
    upward = [f"{m} (floor {_floor(m)}) imports {t} (floor {_floor(t)})"
              for m, targets in sorted(_edges(modules).items()) for t in sorted(targets) if _floor(t) > _floor(m)]
    assert upward == []


def test_no_import_cycles():
    edges = _edges(_modules())
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    assert cycles == []


def test_no_module_past_the_size_of_one_concern():
    long = [f"{p.relative_to(ROOT.parent)}: {n} lines" for p in sorted(ROOT.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert long == []


def test_only_the_tasks_ask_which_task_or_corpus_it_is():
    """Shared code never branches on a task's corpus or name; that is what the task interface is for."""
    asks = re.compile(r"""(corpus|task(\.name)?)\s*[!=]=\s*["'](ptb|parsing|translation)["']""")
    found = [f"{p.relative_to(ROOT.parent)}:{i}: {line.strip()}" for p in sorted(ROOT.rglob("*.py"))
             if "tasks" not in p.relative_to(ROOT).parts[:1]
             for i, line in enumerate(p.read_text().splitlines(), 1) if asks.search(line)]
    assert found == []
