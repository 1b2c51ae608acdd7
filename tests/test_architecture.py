"""The package's layering: no import cycle, no import pointing up a layer, no dispatch on problem or
term classes in the certificate, the backends or the model files (issue 11).

Every ``import`` statement of ``metricopt`` is read with :mod:`ast` (module-level and inside
functions alike), so a lazy import counts as much as an eager one.
"""

from __future__ import annotations

import ast
import importlib
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1] / "metricopt"

#: layers, bottom first: a module may import its own layer or the ones below it
LAYERS = [
    ["errors", "protocols", "linalg", "_validation", "_version", "_deadline", "options", "_lazy", "costmodel", "setops"],
    ["constraints", "knn", "balltree", "datasets", "search"],
    ["problems", "losses"],
    ["solution"],
    ["certify"],
    ["backends"],
    ["solving"],
    ["estimators"],
    ["methods"],  # the method families (metricopt/methods/<family>/), on the core above, which never imports them
    ["terms", "io"],
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
        if mod.startswith("metricopt.problems") or mod.startswith("metricopt.methods.") and mod.endswith("problem"):
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
    problem_and_term_classes = _classes("problems") | _classes("methods")
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


# ---------------------------------------------------------------- the protocol, read and declared (issue 29)
#: the layers that read problems and terms only through metricopt.protocols
READERS = ("backends", "certify")
#: a problem: any ``problem`` (and ``<x>.problem``, e.g. ``self.problem``), or a function's parameter ``p`` / ``prob``
PROBLEM_NAMES, PROBLEM_PARAMS = {"problem"}, {"p", "prob"}
#: a term: any ``term`` or ``t``, a name bound by iterating over a term collection, an item of one
TERM_NAMES = {"term", "t"}
TERM_COLLECTIONS = re.compile(r"\b(terms|term_classes|hinges|parts|generic)\b")

#: getattr / hasattr probes left on problems in the readers: (file, member) -> why it stays a probe
PROBLEM_PROBES_ALLOWED: dict = {}
#: ... and on terms
TERM_PROBES_ALLOWED = {
    ("certify/core.py", "cvxpy"): "the generic certifier needs only a term's CVXPY form, a narrower test than "
                                  "ExactTerm's (which also asks for value, config, describe)",
    ("certify/triplets.py", "loss"): "the test that refuses, with a message, a 'triplet_loss' piece whose term has no "
                                 "ScalarLoss (ScalarLossTerm) the certificate could read",
    ("certify/generic.py", "loss"): "a 'triplet_loss' piece's scalar loss; the hinge's term needs none",
}


def _reader_files():
    return sorted(p for layer in READERS for p in (ROOT / layer).rglob("*.py"))


class _Reads(ast.NodeVisitor):
    """Attribute reads on problems and terms in one module, and the getattr / hasattr probes on them."""

    def __init__(self):
        self.problem, self.term, self.problem_probes, self.term_probes = [], [], [], []
        self.params = [set()]  # the parameters of the enclosing functions
        self.term_names = [set(TERM_NAMES)]

    def _function(self, node):
        args = node.args
        names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
        self.params.append(self.params[-1] | names)
        self.term_names.append(set(self.term_names[-1]))
        self.generic_visit(node)
        self.params.pop()
        self.term_names.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def _bind(self, target, iterable):
        if TERM_COLLECTIONS.search(ast.unparse(iterable)):
            self.term_names[-1].update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))

    def visit_For(self, node):
        self._bind(node.target, node.iter)
        self.generic_visit(node)

    def visit_comprehension(self, node):
        self._bind(node.target, node.iter)
        self.generic_visit(node)

    def is_problem(self, node):
        if isinstance(node, ast.Name):
            return node.id in PROBLEM_NAMES or (node.id in PROBLEM_PARAMS and node.id in self.params[-1])
        return isinstance(node, ast.Attribute) and node.attr == "problem"

    def is_term(self, node):
        if isinstance(node, ast.Name):
            return node.id in self.term_names[-1]
        return isinstance(node, ast.Subscript) and bool(TERM_COLLECTIONS.search(ast.unparse(node.value)))

    def visit_Attribute(self, node):
        if isinstance(node.ctx, ast.Load):
            if self.is_problem(node.value):
                self.problem.append((node.attr, node.lineno))
            elif self.is_term(node.value):
                self.term.append((node.attr, node.lineno))
        self.generic_visit(node)

    def visit_Call(self, node):
        if (isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            name = node.args[1].value
            if self.is_problem(node.args[0]):
                self.problem.append((name, node.lineno))
                self.problem_probes.append((name, node.lineno))
            elif self.is_term(node.args[0]):
                self.term.append((name, node.lineno))
                self.term_probes.append((name, node.lineno))
        self.generic_visit(node)


def _reads():
    """``{relative path: _Reads}`` over the readers' modules."""
    out = {}
    for path in _reader_files():
        reads = _Reads()
        reads.visit(ast.parse(path.read_text()))
        out[str(path.relative_to(ROOT))] = reads
    return out


def _declared(protocols):
    from metricopt.protocols import protocol_members

    return set().union(*(protocol_members(p) for p in protocols))


def test_backends_and_certificates_read_only_declared_members_of_problems_and_terms():
    from metricopt.protocols import PROBLEM_PROTOCOLS, TERM_PROTOCOLS

    problem_members, term_members = _declared(PROBLEM_PROTOCOLS), _declared(TERM_PROTOCOLS)
    reads = _reads()
    undeclared = sorted({f"{f}:{line}: problem.{name}" for f, r in reads.items() for name, line in r.problem
                         if name not in problem_members}
                        | {f"{f}:{line}: term.{name}" for f, r in reads.items() for name, line in r.term
                           if name not in term_members})
    assert undeclared == [], "declare these members in metricopt/protocols.py:\n" + "\n".join(undeclared)
    # the scan sees the reads it is meant to see (a scan that finds nothing would pass vacuously)
    problem_read = {name for r in reads.values() for name, _ in r.problem}
    term_read = {name for r in reads.values() for name, _ in r.term}
    assert {"geometry", "terms", "find_triplets", "triplet_scatter", "latent_at", "pairs", "budget_whitening",
            "sample_weight", "X_lifted"} <= problem_read
    assert {"value", "cvxpy", "dual_piece", "jax_active_set", "jax_value_grad", "violators",
            "jax_prox_psd"} <= term_read


def test_probes_on_problems_and_terms_are_an_explicit_allow_list():
    reads = _reads()
    problem_probes = {(f, name) for f, r in reads.items() for name, _ in r.problem_probes}
    term_probes = {(f, name) for f, r in reads.items() for name, _ in r.term_probes}
    assert problem_probes == set(PROBLEM_PROBES_ALLOWED), (
        "a getattr / hasattr probe on a problem: read a declared member instead (a default on the base Problem, or "
        "isinstance(problem, <capability protocol>)); the allow-list is tests/test_architecture.py's "
        "PROBLEM_PROBES_ALLOWED")
    assert term_probes == set(TERM_PROBES_ALLOWED), (
        "a getattr / hasattr probe on a term: read a declared member instead (isinstance(term, <capability "
        "protocol>)); the allow-list is tests/test_architecture.py's TERM_PROBES_ALLOWED")
    assert sum(len(r.term_probes) for r in reads.values()) == len(TERM_PROBES_ALLOWED)


def test_the_base_classes_satisfy_the_protocols():
    """Every built-in problem satisfies :class:`~metricopt.protocols.ProblemLike` and its family's capability
    protocol, and every registered term the :class:`~metricopt.protocols.TermLike` union."""
    import numpy as np

    import metricopt as mo
    from metricopt import protocols as P
    from metricopt.problems.terms import TERMS

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(24, 3)), np.repeat([0, 1, 2], 8)
    pairs = np.array([[0, 1], [2, 3], [8, 9], [0, 8], [1, 16], [9, 17]])
    step = mo.GerrymanderStepProblem(X, y, 2, np.tile(np.arange(2), (24, 1)) + 0)
    cases = [
        (mo.LMNNProblem(X, y, k=2), P.TripletProblem),
        (mo.MultiMetricLMNNProblem(X, y, k=2), P.TripletProblem),
        (mo.MultiMetricLMNNProblem(X, y, k=2), P.NeighbourPredictor),
        (mo.MMCProblem(X, y), P.BudgetProblem),
        (mo.POLAProblem(X, pairs=pairs, pair_labels=[1, 1, 1, -1, -1, -1], C=1.0), P.PairProblem),
        (step, P.LatentProblem),
    ]
    for problem, capability in cases:
        assert P.missing_members(problem, P.ProblemLike) == [], type(problem).__name__
        assert P.missing_members(problem, capability) == [], (type(problem).__name__, capability.__name__)
    lmnn = cases[0][0]
    for term in [*lmnn.terms, *step.terms, *cases[3][0].terms, *cases[4][0].terms]:
        assert isinstance(term, P.TermLike), term
    assert isinstance(lmnn.terms[1], P.WorkingSetLoss) and isinstance(lmnn.terms[1], P.ActiveSetLoss)
    assert isinstance(lmnn.terms[1], P.ScalarLossTerm)
    for name, cls in TERMS.items():
        assert P.protocol_members(P.TermLike) <= set(dir(cls)), name


def _public_names(package):
    """The names a package exports: its ``__all__`` (read with :mod:`ast`), else its top-level names without ``_``."""
    path = ROOT.parent.joinpath(*package.split("."), "__init__.py")
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {n for n in names if not n.startswith("_")}


def test_the_methods_use_only_the_backends_public_api():
    """The method families (``methods/``: local metrics' batch, LMNN-R's solver, ...) import from
    ``metricopt.backends`` only names a backend package exports (its ``__all__``), never a backend's internal module
    or a ``_``-prefixed name (issue 31)."""
    public = {pkg: _public_names(pkg) for pkg in ("metricopt.backends", "metricopt.backends.jax")}
    files = sorted((ROOT / "methods").rglob("*.py"))
    bad = []
    for path in files:
        mod = _name(path)
        package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if not (target == "metricopt.backends" or target.startswith("metricopt.backends.")):
                    continue
                for alias in node.names:
                    if target not in public or alias.name.startswith("_") or alias.name not in public[target]:
                        bad.append(f"{mod}: from {target} import {alias.name}")
            elif isinstance(node, ast.Import):
                bad += [f"{mod}: import {a.name}" for a in node.names
                        if a.name.startswith("metricopt.backends.") and a.name not in public]
    assert not bad, "private imports of backend internals:\n" + "\n".join(bad)


#: class names defined in more than one module on purpose: ``Options`` is the name the backend protocol asks each
#: backend module to declare (the protocols of a term and a problem are ``TermLike`` and ``ProblemLike``, apart from
#: the base classes ``Term`` and ``Problem``)
SHARED_CLASS_NAMES = {"Options"}


def test_no_class_name_is_used_for_two_classes():
    where: dict = {}
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(_name(path))
    shared = {name: mods for name, mods in where.items() if len(mods) > 1 and name not in SHARED_CLASS_NAMES}
    assert not shared, f"class names used for two classes: {shared}"


#: the method families: folder of metricopt/methods -> the public classes it defines (problems and estimators)
FAMILIES = {
    "lmnn": {"LMNNProblem", "KernelLMNNProblem", "MultiMetricLMNNProblem", "LMNN", "KernelLMNN", "MultiMetricLMNN",
             "MultiPassResult"},
    "nca": {"NCAProblem", "MLCCProblem", "NCA", "MLCC"},
    "pairs": {"MMCProblem", "POLAProblem", "MMC", "POLA"},
    "baselines": {"PCA", "Whitening", "LDA", "RCA"},
    "gerrymander": {"GerrymanderingProblem", "GerrymanderStepProblem", "GerrymanderingKNN"},
    "local": {"LocalMetricKNN"},
}


def test_each_method_family_is_one_folder():
    """Issue 31, item 3: every public problem and estimator of a method lives in its family's folder
    (``metricopt/methods/<family>/``, with its algorithms) and is the same object from the family's package and from
    ``metricopt``'s namespace; no other public class lives in ``methods/``, and the root holds no method."""
    import metricopt as mo

    for family, names in FAMILIES.items():
        for name in names:
            module = getattr(mo, name).__module__
            assert module.startswith(f"metricopt.methods.{family}."), (name, module)
            assert getattr(importlib.import_module(f"metricopt.methods.{family}"), name) is getattr(mo, name)
    in_families = set().union(*FAMILIES.values())
    others = {n: getattr(mo, n).__module__ for n in mo.__all__ if isinstance(getattr(mo, n), type)}
    others = {n: m for n, m in others.items() if n not in in_families}
    assert not [n for n, m in others.items() if m.startswith("metricopt.methods.")], others
    root = {p.stem for p in ROOT.glob("*.py")}
    assert not root & {"gerrymander", "latent", "lowrank", "multipass", "early_stopping", "energy", "baselines"}
