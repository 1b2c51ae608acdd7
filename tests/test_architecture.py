"""The package's layering: no import cycle, no import pointing up a layer, no dispatch on problem or
term classes in the certificate, the backends or the model files (issue 11).

Every ``import`` statement of ``metricopt`` is read with :mod:`ast` (module-level and inside
functions alike), so a lazy import counts as much as an eager one.
"""

from __future__ import annotations

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1] / "metricopt"

#: layers, bottom first: a module may import its own layer or the ones below it
LAYERS = [
    ["errors", "protocols", "linalg", "_validation", "_version", "_deadline"],
    ["constraints", "knn", "balltree", "energy", "datasets", "baselines", "gerrymander"],
    ["problems", "terms"],
    ["solution"],
    ["certify"],
    ["backends"],
    ["solving"],
    ["lowrank", "multipass", "early_stopping", "latent", "local"],
    ["estimators"],
    ["io"],
    [""],  # metricopt/__init__.py: the public namespace
    ["cli", "__main__"],
]


def _name(path):
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_graph():
    """``{module: set of metricopt modules it imports}``."""
    modules = {_name(p): p for p in ROOT.rglob("*.py")}
    graph = {}
    for mod, path in modules.items():
        package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        out = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:
                    full = f"{target}.{alias.name}"
                    out.add(full if full in modules else target)
            elif isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
        graph[mod] = {t for t in out if t in modules and t != mod}
    return graph


def _layer(module):
    top = module.split(".")[1] if module.count(".") else ""
    for rank, names in enumerate(LAYERS):
        if top in names:
            return rank
    raise AssertionError(f"module {module} is in no layer of tests/test_architecture.py: add it")


def _cycles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    assert _cycles(import_graph()) == []


def test_no_import_points_up_a_layer():
    graph = import_graph()
    upward = [(a, b) for a, targets in graph.items() for b in targets if _layer(b) > _layer(a)]
    assert upward == []


def test_the_problem_layer_imports_no_backend_and_no_certificate():
    graph = import_graph()
    for mod, targets in graph.items():
        if mod.startswith("metricopt.problems"):
            assert not any(t.startswith(("metricopt.backends", "metricopt.certify", "metricopt.solving"))
                           for t in targets), mod


def _classes(package):
    out = set()
    for path in (ROOT / package).rglob("*.py") if (ROOT / package).is_dir() else [ROOT / package]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                out.add(node.name)
    return out


def test_certify_backends_and_io_never_dispatch_on_problem_or_term_classes():
    problem_and_term_classes = _classes("problems")
    assert {"LMNNProblem", "MMCProblem", "POLAProblem", "Linear", "TripletHinge"} <= problem_and_term_classes
    found = []
    files = [*(ROOT / "certify").rglob("*.py"), *(ROOT / "backends").rglob("*.py"), ROOT / "io.py"]
    for path in files:
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            for call in re.findall(r"isinstance\(([^)]*)\)", line):
                named = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", call.split(",", 1)[-1]))
                if named & problem_and_term_classes:
                    found.append(f"{path.relative_to(ROOT.parent)}:{lineno}: {line.strip()}")
    assert found == []


def test_backends_declare_accepts_and_typed_options():
    import dataclasses

    from metricopt.backends import BACKENDS, backend_module

    for name in BACKENDS:
        module = backend_module(name)
        assert module.NAME == name
        assert dataclasses.is_dataclass(module.Options) and callable(module.accepts)
