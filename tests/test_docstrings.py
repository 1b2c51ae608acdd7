"""Issue 31, item 4: every public function and method of the modules listed here has a NumPy-style docstring
(a ``Parameters`` section naming each parameter, a ``Returns`` or ``Yields`` section unless it returns ``None``)
and type hints on every parameter and on its return.

The modules are listed explicitly: add a module here when its docstrings are done. A method without a docstring
of its own may inherit its base class's (as Sphinx does); properties and names with a leading underscore are not
checked.
"""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

#: the modules whose public functions and methods are checked (issue 31, item 4)
MODULES = (
    "metricopt",
    "metricopt._lazy",
    "metricopt.certify",
    "metricopt.certify.agreement",
    "metricopt.certify.certificate",
    "metricopt.certify.core",
    "metricopt.certify.dual",
    "metricopt.certify.generic",
    "metricopt.certify.latent",
    "metricopt.certify.triplets",
    "metricopt.certify.pairs",
    "metricopt.certify.policy",
    "metricopt.certify.rank2_dual",
    "metricopt.certify.verified",
    "metricopt.problems",
    "metricopt.problems.base",
    "metricopt.methods.gerrymander.problem",
    "metricopt.methods.lmnn.kernel_problem",
    "metricopt.methods.lmnn.problem",
    "metricopt.methods.nca.mlcc_problem",
    "metricopt.methods.pairs.mmc_problem",
    "metricopt.methods.lmnn.multimetric_problem",
    "metricopt.methods.nca.problem",
    "metricopt.methods.pairs.pola_problem",
    "metricopt.problems.regularizers",
    "metricopt.methods.nca.softmax",
    "metricopt.problems.terms",
    "metricopt.balltree",
    "metricopt.search",
    "metricopt.methods.baselines.transforms",
    "metricopt.cli",
    "metricopt.constraints",
    "metricopt.datasets",
    "metricopt.methods.lmnn.early_stopping",
    "metricopt.methods.lmnn.energy",
    "metricopt.errors",
    "metricopt.estimators",
    "metricopt.estimators.base",
    "metricopt.methods.baselines.estimator",
    "metricopt.methods.gerrymander.estimator",
    "metricopt.methods.lmnn.kernel_estimator",
    "metricopt.methods.lmnn.estimator",
    "metricopt.methods.local.estimator",
    "metricopt.methods.lmnn.multimetric_estimator",
    "metricopt.methods.nca.estimator",
    "metricopt.methods.nca.numpy_path",
    "metricopt.methods.gerrymander.inference",
    "metricopt.io",
    "metricopt.knn",
    "metricopt.methods.gerrymander.cccp",
    "metricopt.linalg",
    "metricopt.methods.local",
    "metricopt.methods.local.batch",
    "metricopt.methods.local.lda",
    "metricopt.methods.local.line_integral",
    "metricopt.methods.local.taxonomy",
    "metricopt.losses",
    "metricopt.methods.lmnn.multipass",
    "metricopt.options",
    "metricopt.protocols",
    "metricopt.solution",
    "metricopt.solving",
    "metricopt.terms",
    "metricopt.backends",
    "metricopt.backends.cvxpy_backend",
    "metricopt.backends.jax",
    "metricopt.backends.jax.backend",
    "metricopt.backends.jax.batch",
    "metricopt.backends.jax.driver",
    "metricopt.backends.jax.geometry",
    "metricopt.backends.jax.loop",
    "metricopt.backends.jax.prox",
    "metricopt.backends.jax.solvers",
    "metricopt.methods.lmnn.lowrank",
)

SECTION = r"^{}\n-{{3,}}\n"


def public_callables(module_name):
    """``(qualified name, function, is_method)`` for the module's own public functions and the public methods
    (plain, static and class methods) defined in its public classes."""
    module = importlib.import_module(module_name)
    out = []
    for name, obj in sorted(vars(module).items()):
        if name.startswith("_") or getattr(obj, "__module__", None) != module_name:
            continue
        if inspect.isfunction(obj):
            out.append((f"{module_name}.{name}", obj, False))
        elif inspect.isclass(obj):
            for mname, member in vars(obj).items():
                if mname.startswith("_"):
                    continue
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                if inspect.isfunction(member) and member.__qualname__.startswith(obj.__qualname__ + "."):
                    out.append((f"{module_name}.{name}.{mname}", member, not isinstance(vars(obj)[mname], staticmethod)))
    return out


def own_parameters(func, is_method):
    """The parameters a caller passes (``self`` / ``cls`` of a method left out)."""
    params = list(inspect.signature(func).parameters.values())
    if is_method and params and params[0].name in ("self", "cls"):
        params = params[1:]
    return params


def section(doc, title):
    """The text of the NumPy-style section ``title`` of ``doc`` (``None`` when absent)."""
    m = re.search(SECTION.format(title), doc, re.M)
    if m is None:
        return None
    rest = doc[m.end():]
    end = re.search(r"^\S[^\n]*\n-{3,}\n", rest, re.M)
    return rest[:end.start()] if end else rest


def documented_names(text):
    """The parameter names an entry line of a ``Parameters`` section names (``a, b : type``, ``**kwargs``)."""
    names = set()
    for line in text.splitlines():
        if not line or line[0].isspace():
            continue
        head = line.split(" : ")[0]
        names.update(part.strip().lstrip("*") for part in head.split(","))
    return names


def problems_of(func, is_method):
    """What ``func`` lacks: its docstring, sections, documented parameters, type hints."""
    found = []
    doc = inspect.getdoc(func) or ""
    params = own_parameters(func, is_method)
    annotations = func.__annotations__
    if not doc.strip():
        found.append("no docstring")
    if params:
        text = section(doc, "Parameters")
        if text is None:
            found.append("no Parameters section")
        else:
            missing = [p.name for p in params if p.name not in documented_names(text)]
            if missing:
                found.append(f"Parameters section lacks {missing}")
    if "return" not in annotations:
        found.append("no return annotation")
    elif annotations["return"] not in (None, "None") and section(doc, "Returns") is None \
            and section(doc, "Yields") is None:
        found.append("no Returns section")
    unhinted = [p.name for p in params if p.name not in annotations]
    if unhinted:
        found.append(f"no type hints for {unhinted}")
    return found


CASES = [case for module in MODULES for case in public_callables(module)]


def test_the_listed_modules_have_public_callables():
    assert len(CASES) > 300  # a listed module that vanished, or a broken collector, would shrink this


@pytest.mark.parametrize("name, func, is_method", CASES, ids=[c[0] for c in CASES])
def test_numpy_docstring_and_type_hints(name, func, is_method):
    assert problems_of(func, is_method) == [], f"{name}: {problems_of(func, is_method)}"
