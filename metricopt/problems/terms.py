"""Objective terms: each written once, with its float64 value and its CVXPY expression.

A term is a piece of an objective ``sum_k term_k(V)`` over the problem's variables
``V`` (``V["M"]``, the metric; ``V["b"]`` for problems with a threshold). Every term
provides

* ``value(problem, V)``: its exact float64 value at a numpy point (over every
  triplet / pair, never a sample), used for objectives and certificates;
* ``cvxpy(problem, V, ws)``: a CVXPY expression (and extra constraints) over CVXPY
  variables, used by the exact backend; ``ws`` is the term's working set when
  ``uses_working_set`` is true;
* ``convex``: whether the term is convex in ``V``;
* for the JAX backend (``has_jax = True``): ``jax_data(problem)``, the arrays its JAX
  piece needs (passed to the jitted solver loop as dynamic inputs, so that a second
  problem of the same shapes reuses the compiled loop), and the pure-JAX static
  methods ``jax_value_grad(data, V, active=None, smoothing=0.0)`` ->
  ``(value, exact_value, gradients)`` over a dict ``V`` of JAX arrays (``V["M"]``, and
  ``V["b"]`` where the problem has a threshold), ``gradients`` a dict with an entry for
  each variable the term depends on, and ``jax_value(data, V, ...)`` (the value alone,
  written pair- or triplet-wise, so that ``jax.grad`` of it checks the matrix-form gradient).
  ``value`` is what a solver minimises (possibly smoothed), ``exact_value`` the
  unsmoothed term; terms with a working set evaluate both over their active set.
  ``jax`` is imported inside these methods only: importing metricopt never imports
  it nor touches its configuration.

New losses and regularizers are added by subclassing :class:`Term`; the registry
:data:`TERMS` lists every concrete class, and the test suite checks each one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._validation import as_real_array, check_real
from ..errors import InputError
from ..losses import Hinge, ScalarLoss, SmoothHinge, SquaredHinge, as_loss, smoothed_hinge
from ..protocols import DualPiece
from ..setops import member

from typing import TYPE_CHECKING

from .._lazy import lazy_module

if TYPE_CHECKING:
    import cvxpy as cp
else:
    cp = lazy_module("cvxpy")  # imported on first use: building a term's CVXPY expression


def _pair_differences(problem, pairs):
    """``x_a - x_b`` for each pair (rows), the JAX pieces' data for pair terms."""
    return problem.X[pairs[:, 0]] - problem.X[pairs[:, 1]]


def _row_differences(X, rows):
    """``X[rows[:, 0]] - X[rows[:, 1]]`` on the device (jitted once per shape)."""
    global _ROW_DIFFERENCES
    if _ROW_DIFFERENCES is None:
        import jax

        _ROW_DIFFERENCES = jax.jit(lambda X, r: X[r[:, 0]] - X[r[:, 1]])
    return _ROW_DIFFERENCES(X, rows)


_ROW_DIFFERENCES = None


def _anchor_weights(problem, i):
    """The weights of the anchors ``i`` of triplets (weighted LMNN), or ``None`` for an unweighted problem
    (:meth:`metricopt.protocols.TripletProblem.anchor_weights`)."""
    return problem.anchor_weights(i)


def _weighted_scatter(D, w):
    """``sum_t w_t D_t D_t^T = D^T diag(w) D`` (JAX), the adjoint of ``M -> (D_t^T M D_t)_t``."""
    return (D * w[:, None]).T @ D


#: largest ``n`` for which the JAX pieces of pair terms use the ``n x n`` Gram form (8 n^2 bytes: 800 MB at
#: 10,000 points)
PAIR_GRAM_MAX_N = 10_000
#: ``"auto"`` (by flop count, below), ``"gram"`` or ``"differences"``: the form of the pair terms' JAX data
PAIR_FORM = "auto"


def _pair_jax_data(problem, pairs):
    """The JAX pieces' data for pair terms, in the cheaper of two forms (chosen once, by flop count).

    * differences ``{"D": x_a - x_b}`` (``T x d``): distances ``diag(D M D^T)`` and the gradient's scatter
      ``D^T diag(w) D`` cost ``~4 T d^2`` flops;
    * Gram ``{"X", "a", "b"}``: ``K = X M X^T`` (``2 n^2 d + 2 n d^2`` flops), ``d_t = K_aa + K_bb - 2 K_ab``,
      and the scatter as the weighted graph Laplacian ``X^T (Diag(W 1) - W) X`` of ``W = sum_t w_t
      (e_a e_b^T + e_b e_a^T)`` (``4 n^2 d + 2 n d^2`` flops). With every pair of a data set (MMC, POLA:
      ``T ~ n^2 / 2``) it is 9-23 times faster on digits (1,257 x 64, 711,000 MMC / 789,000 POLA pairs, 2
      cores: 24 ms against 547 ms per value and gradient, 58 against 513; ``benchmarks/results/pair_forms.md``).

    Both are exact algebra; the Gram form rounds ``d_t`` with an absolute error of order ``eps K_aa`` instead
    of ``eps d_t`` (a smoothed solver's iterate only: objectives and certificates are computed on the host
    from explicit differences)."""
    n, d = problem.X.shape
    T = len(pairs)
    cheaper = n <= PAIR_GRAM_MAX_N and 6 * n * n * d + 4 * n * d * d < 4 * T * d * d
    if PAIR_FORM == "gram" or (PAIR_FORM == "auto" and cheaper):
        return {"X": problem.X, "a": pairs[:, 0], "b": pairs[:, 1]}
    return {"D": _pair_differences(problem, pairs)}


def _jax_pair_distances(data, M):
    """``d_M(x_a, x_b)`` for every pair of a pair term's JAX data (either form of :func:`_pair_jax_data`)."""
    import jax.numpy as jnp

    if "D" in data:
        D = data["D"]
        return jnp.einsum("td,td->t", D @ M, D)
    X, a, b = data["X"], data["a"], data["b"]
    K = X @ M @ X.T
    q = jnp.diagonal(K)
    return q[a] + q[b] - 2.0 * K[a, b]


def _jax_pair_scatter(data, w):
    """``sum_t w_t (x_a - x_b)(x_a - x_b)^T`` for a pair term's JAX data: the adjoint of
    :func:`_jax_pair_distances` applied to ``w``."""
    import jax.numpy as jnp

    if "D" in data:
        return _weighted_scatter(data["D"], w)
    X, a, b = data["X"], data["a"], data["b"]
    n = X.shape[0]
    W = jnp.zeros((n, n), X.dtype).at[a, b].add(w)
    W = W + W.T
    return (X * jnp.sum(W, axis=1)[:, None]).T @ X - X.T @ (W @ X)


#: every concrete term class, by name (filled by ``register``)
TERMS: dict[str, type] = {}


def register(cls: type) -> type:
    """Class decorator: add a concrete term class to :data:`TERMS` (by its name).

    Parameters
    ----------
    cls : type
        The term class.

    Returns
    -------
    type
        ``cls`` itself.
    """
    TERMS[cls.__name__] = cls
    return cls


def term_from_config(config: Any) -> Term:
    """The term described by ``config`` (the dict of :meth:`Term.config`); an unknown name or
    arguments the class does not take raise :class:`~metricopt.errors.InputError`.

    Parameters
    ----------
    config : dict
        The dict of :meth:`Term.config` (``{"term": class name, **arguments}``).

    Returns
    -------
    Term
        The rebuilt term.

    Raises
    ------
    InputError
        When ``config`` is not a dict with a ``"term"`` name, the name is unknown, or the class does not take
        the arguments.
    """
    if not isinstance(config, dict) or "term" not in config:
        raise InputError(f"a term's configuration must be a dict with a 'term' name; got {config!r}.")
    args = {k: v for k, v in config.items() if k != "term"}
    cls = TERMS.get(config["term"])
    if cls is None:
        raise InputError(f"unknown term {config['term']!r}; known terms: {', '.join(sorted(TERMS))}.")
    try:
        return cls(**args)
    except TypeError as exc:
        raise InputError(f"cannot rebuild the term {config['term']!r} from {args}: {exc}") from None


class Term:
    """Base class of objective terms (see the module docstring and :class:`metricopt.protocols.TermLike`).

    A new term overrides ``value`` and ``cvxpy``; for the JAX backend, ``jax_data`` and the pure-JAX
    ``jax_value`` (its gradient then comes from autodiff, or the term overrides ``jax_value_grad``);
    for the certificate, ``dual_piece``. ``has_jax`` is true as soon as ``jax_value`` is given.
    """

    convex = True
    uses_working_set = False
    #: whether the JAX value is smoothed by the ``smoothing`` width (the loop then drives it down)
    jax_smoothed = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "has_jax" not in cls.__dict__:
            cls.has_jax = getattr(cls, "jax_value") is not Term.__dict__["jax_value"]

    def value(self, problem: Any, V: Mapping[str, Any]) -> float:  # pragma: no cover - abstract
        """The exact float64 value at a numpy point ``V`` (over every triplet / pair).

        Parameters
        ----------
        problem : Problem
            The problem the term belongs to (its points, labels, pairs or triplets).
        V : dict
            The point: ``V["M"]`` the (d, d) metric (a numpy array), ``V["b"]`` the threshold where the problem
            has one.

        Returns
        -------
        float
            The term's value.
        """
        raise NotImplementedError

    def cvxpy(self, problem: Any, V: Mapping[str, Any], ws: Any = None
              ) -> tuple[Any, list]:  # pragma: no cover - abstract
        """Return ``(expression, [constraints])``.

        Parameters
        ----------
        problem : Problem
            The problem the term belongs to (its points, labels, pairs or triplets).
        V : dict
            The CVXPY variables by name: ``V["M"]`` the metric, ``V["Mvec"]`` its row-major vectorisation,
            ``V["b"]`` where the problem has a threshold (and the exact backend's scaling entries).
        ws : ndarray or None
            The term's working set (rows of triplets or sets) when ``uses_working_set`` is true; ignored
            otherwise.

        Returns
        -------
        expression : cvxpy.Expression
            The term over the variables.
        constraints : list
            Extra constraints (e.g. on slack variables), possibly empty.
        """
        raise NotImplementedError

    def dual_piece(self, problem: Any) -> DualPiece | None:
        """The term's place in the certificates' dual (:class:`metricopt.protocols.DualPiece`), or
        ``None``: the certificates then bound it from its CVXPY expression (:mod:`metricopt.certify.generic`)
        where they can, and refuse otherwise (:class:`~metricopt.errors.NotCertifiableError`).

        Parameters
        ----------
        problem : Problem
            The problem the term belongs to (its points, labels, pairs or triplets).

        Returns
        -------
        DualPiece or None
            Its :class:`~metricopt.protocols.DualPiece`, or ``None``: bounded generically from its CVXPY
            expression (:mod:`metricopt.certify.generic`) where possible.
        """
        return None

    #: ``False`` for a term without a dual piece whose CVXPY form the generic certificate cannot bound
    #: (exponential or power cones, e.g. MLCC's log-partition): the certificates then refuse it at once
    generic_certificate = True

    #: whether the term provides the JAX pieces below (``backend="jax"``)
    has_jax = False

    def jax_data(self, problem: Any) -> dict:
        """Arrays (a dict of numpy float64 / int arrays) the JAX piece needs.

        Parameters
        ----------
        problem : Problem
            The problem the term belongs to (its points, labels, pairs or triplets).

        Returns
        -------
        dict
            Numpy float64 / int arrays by name.

        Raises
        ------
        NotImplementedError
            For a term without a JAX piece.
        """
        raise NotImplementedError(f"the term {self!r} has no JAX piece; backend='jax' cannot solve this problem.")

    @classmethod
    def jax_value_grad(cls, data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> tuple[Any, Any, dict]:
        """``(value, exact_value, gradients)`` at a point ``V`` (dict of JAX arrays, ``V["M"]`` symmetric).

        Default: ``jax.value_and_grad`` of :meth:`jax_value` over every variable of ``V`` (the ``M``
        gradient symmetrised); terms with a cheaper matrix form override it.

        Parameters
        ----------
        data : dict
            The arrays of :meth:`jax_data` (as JAX arrays).
        V : dict
            The point, a dict of JAX arrays (``V["M"]`` symmetric; ``V["b"]`` where the problem has a
            threshold).
        active : dict or None
            The padded active set of a working-set loss (``jax_active_set``); unused by other terms.
        smoothing : float
            The smoothing width of a non-smooth term (0: the exact value).

        Returns
        -------
        value : jax.Array
            The (smoothed) value a solver minimises.
        exact_value : jax.Array
            The unsmoothed value.
        gradients : dict
            The gradient of ``value`` for each variable the term depends on (``"M"`` symmetric).
        """
        import jax

        value, grads = jax.value_and_grad(lambda W: cls.jax_value(data, W, active, smoothing))(dict(V))
        if "M" in grads:
            grads["M"] = 0.5 * (grads["M"] + grads["M"].T)
        exact = cls.jax_value(data, V, active, 0.0) if cls.jax_smoothed else value
        return value, exact, grads

    @staticmethod
    def jax_value(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> Any:  # pragma: no cover - abstract
        """The (smoothed) value alone, in pure JAX.

        Parameters
        ----------
        data : dict
            The arrays of :meth:`jax_data` (as JAX arrays).
        V : dict
            The point, a dict of JAX arrays (``V["M"]`` symmetric; ``V["b"]`` where the problem has a
            threshold).
        active : dict or None
            The padded active set of a working-set loss (``jax_active_set``); unused by other terms.
        smoothing : float
            The smoothing width of a non-smooth term (0: the exact value).

        Returns
        -------
        jax.Array
            The scalar value (smoothed to ``smoothing`` where the term is smoothed).
        """
        raise NotImplementedError

    def describe(self) -> str:
        """A short human-readable name (messages, ``repr``).

        Returns
        -------
        str
            The name.
        """
        return type(self).__name__

    def config(self) -> dict | None:
        """The term as a JSON-serialisable dict ``{"term": class name, **constructor arguments}``, from
        which :func:`term_from_config` rebuilds it (model files store regularizers this way); ``None``
        for a term that holds data arrays and cannot be stored so.

        Returns
        -------
        dict or None
            ``{"term": class name, **constructor arguments}``, from which
            :func:`metricopt.problems.terms.term_from_config` rebuilds it; ``None`` for a term that holds data
            arrays.
        """
        return None

    def __repr__(self):
        return self.describe()


@register
class Linear(Term):
    """``<P, M> = trace(P M)`` for a fixed symmetric matrix ``P``."""

    def __init__(self, P, name="linear"):
        P = as_real_array(P, "P", "a finite square matrix of real numbers")
        if P.ndim != 2 or P.shape[0] != P.shape[1]:
            raise InputError(f"Linear's P must be a finite square (d, d) matrix; got shape {P.shape}.")
        if not np.all(np.isfinite(P)):
            n_bad = int(P.size - np.count_nonzero(np.isfinite(P)))
            raise InputError(f"Linear's P contains {n_bad} NaN or infinite entries; it must be a finite square "
                             "(d, d) matrix: remove or replace them.")
        self.P = P
        self.name = name

    def value(self, problem: Any, V: Mapping[str, Any]) -> float:
        return float(np.sum(self.P * V["M"]))

    def cvxpy(self, problem: Any, V: Mapping[str, Any], ws: Any = None) -> tuple[Any, list]:
        return cp.sum(cp.multiply(self.P, V["M"])), []

    def linear_part(self, d: int) -> np.ndarray:
        """The term's matrix ``P`` (the term is ``<P, M>``).

        Parameters
        ----------
        d : int
            The number of features.

        Returns
        -------
        (d, d) ndarray
            The linear part.
        """
        return self.P

    def dual_piece(self, problem: Any) -> DualPiece | None:
        return DualPiece(linear=np.asarray(self.linear_part(problem.d), dtype=np.float64))

    has_jax = True

    def jax_data(self, problem: Any) -> dict:
        return {"P": np.asarray(self.linear_part(problem.d), dtype=np.float64)}

    @staticmethod
    def jax_value_grad(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> tuple[Any, Any, dict]:
        import jax.numpy as jnp

        v = jnp.sum(data["P"] * V["M"])
        return v, v, {"M": data["P"]}

    @staticmethod
    def jax_value(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> Any:
        import jax.numpy as jnp

        return jnp.sum(data["P"] * V["M"])

    def describe(self) -> str:
        return f"Linear({self.name})"


@register
class Trace(Term):
    """Trace regulariser ``lam * trace(M)`` (the nuclear norm on the PSD cone)."""

    def __init__(self, lam=1.0):
        self.lam = check_real(lam, "lam", low=0.0)

    def value(self, problem: Any, V: Mapping[str, Any]) -> float:
        return self.lam * float(np.trace(V["M"]))

    def cvxpy(self, problem: Any, V: Mapping[str, Any], ws: Any = None) -> tuple[Any, list]:
        return self.lam * cp.trace(V["M"]), []

    def linear_part(self, d: int) -> np.ndarray:
        """The term's matrix ``P`` (the term is ``<P, M>``).

        Parameters
        ----------
        d : int
            The number of features.

        Returns
        -------
        (d, d) ndarray
            The linear part.
        """
        return self.lam * np.eye(d)

    def dual_piece(self, problem: Any) -> DualPiece | None:
        return DualPiece(linear=self.linear_part(problem.d))

    has_jax = True
    jax_data = Linear.jax_data  # <lam I, M> through linear_part

    @staticmethod
    def jax_value_grad(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> tuple[Any, Any, dict]:
        return Linear.jax_value_grad(data, V, active, smoothing)

    @staticmethod
    def jax_value(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> Any:
        return Linear.jax_value(data, V, active, smoothing)

    def describe(self) -> str:
        return f"Trace(lam={self.lam:g})"

    def config(self) -> dict | None:
        return {"term": "Trace", "lam": float(self.lam)}


@register
class Frobenius(Term):
    """Frobenius regulariser ``(lam / 2) ||M||_F^2`` (strongly convex for ``lam > 0``)."""

    def __init__(self, lam=1.0):
        self.lam = check_real(lam, "lam", low=0.0)

    def value(self, problem: Any, V: Mapping[str, Any]) -> float:
        return 0.5 * self.lam * float(np.sum(V["M"] ** 2))

    def cvxpy(self, problem: Any, V: Mapping[str, Any], ws: Any = None) -> tuple[Any, list]:
        return 0.5 * self.lam * cp.sum_squares(V["M"]), []

    def dual_piece(self, problem: Any) -> DualPiece | None:
        return DualPiece(strong_convexity=self.lam)

    has_jax = True

    def jax_data(self, problem: Any) -> dict:
        return {"lam": np.float64(self.lam)}

    @staticmethod
    def jax_value(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> Any:
        import jax.numpy as jnp

        return 0.5 * data["lam"] * jnp.sum(V["M"] * V["M"])

    @staticmethod
    def jax_value_grad(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> tuple[Any, Any, dict]:
        v = Frobenius.jax_value(data, V)
        return v, v, {"M": data["lam"] * V["M"]}

    def describe(self) -> str:
        return f"Frobenius(lam={self.lam:g})"

    def config(self) -> dict | None:
        return {"term": "Frobenius", "lam": float(self.lam)}


@register
class HalfSquare(Term):
    """``(weight / 2) * v^2`` for a scalar variable ``v`` (POLA's threshold ``b``)."""

    def __init__(self, var="b", weight=1.0):
        self.var = var
        self.weight = check_real(weight, "weight", low=0.0)  # convex for weight >= 0 only

    def value(self, problem: Any, V: Mapping[str, Any]) -> float:
        return 0.5 * self.weight * float(V[self.var]) ** 2

    def cvxpy(self, problem: Any, V: Mapping[str, Any], ws: Any = None) -> tuple[Any, list]:
        return 0.5 * self.weight * cp.square(V[self.var]), []

    def dual_piece(self, problem: Any) -> DualPiece | None:
        return DualPiece(loss="threshold_square", weight=self.weight)

    has_jax = True

    def jax_data(self, problem: Any) -> dict:
        """The arrays the JAX piece needs (dynamic inputs of the jitted loop).

        Parameters
        ----------
        problem : Problem
            The problem the term belongs to (its points, labels, pairs or triplets).

        Returns
        -------
        dict
            Numpy float64 / int arrays by name.

        Raises
        ------
        NotImplementedError
            For a variable other than the threshold ``b``.
        """
        if self.var != "b":
            raise NotImplementedError("the JAX piece of HalfSquare handles the threshold variable 'b' only.")
        return {"weight": np.float64(self.weight)}

    @staticmethod
    def jax_value(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> Any:
        return 0.5 * data["weight"] * V["b"] ** 2

    @staticmethod
    def jax_value_grad(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> tuple[Any, Any, dict]:
        v = HalfSquare.jax_value(data, V)
        return v, v, {"b": data["weight"] * V["b"]}

    def describe(self) -> str:
        return f"HalfSquare({self.var})"


class _TripletLossType(type):
    """Metaclass of :class:`TripletLoss`: ``TripletLoss(loss, weight, margin)`` builds the term of the loss's own
    class (:meth:`TripletLoss.specialised`), and the hinge's term is :class:`TripletHinge` itself.

    The JAX backend compiles its loop once per tuple of term *classes* (a static argument of the jitted loop),
    so the loss a term applies must be part of its class, not only of the instance."""

    def __call__(cls, *args, **kwargs):
        if cls is not TripletLoss:
            return super().__call__(*args, **kwargs)
        bound = _bind_triplet_args(args, kwargs)
        loss = as_loss(bound["loss"])
        if type(loss) is Hinge:
            return TripletHinge(bound["weight"], bound["margin"])
        return super(_TripletLossType, TripletLoss.specialised(type(loss))).__call__(loss, bound["weight"],
                                                                                   bound["margin"])


def _bind_triplet_args(args, kwargs):
    """The arguments ``(loss, weight, margin=0.1)`` of ``TripletLoss(...)`` by name, or InputError."""
    names = ("loss", "weight", "margin")
    if len(args) > len(names):
        raise InputError(f"TripletLoss takes (loss, weight, margin=0.1); got {len(args)} positional arguments.")
    bound = dict(zip(names, args))
    for key, value in kwargs.items():
        if key not in names:
            raise InputError(f"TripletLoss got an unexpected argument {key!r}; it takes (loss, weight, margin=0.1).")
        if key in bound:
            raise InputError(f"TripletLoss got two values for {key!r}.")
        bound[key] = value
    missing = [k for k in ("loss", "weight") if k not in bound]
    if missing:
        raise InputError(f"TripletLoss needs {' and '.join(missing)}: TripletLoss(loss, weight, margin=0.1), e.g. "
                         "TripletLoss('squared_hinge', 0.5).")
    bound.setdefault("margin", 0.1)
    return bound


@register
class TripletLoss(Term, metaclass=_TripletLossType):
    r"""``weight * sum_{i, j in N_k(i), l: y_l != y_i} loss(1 + d_M(x_i, x_j) - d_M(x_i, x_l))``.

    LMNN's push term (Weinberger & Saul, JMLR 2009, Eq. 14, second sum) with the hinge replaced by any
    convex, non-decreasing scalar loss :math:`\ell` that vanishes for :math:`h \le 0`
    (:class:`metricopt.losses.ScalarLoss`: the hinge, the squared hinge, the Huber hinge):

    .. math::

        w \sum_t \ell(h_t), \qquad h_t = 1 + d_M(x_i, x_j) - d_M(x_i, x_l) = 1 - \langle A_t, M\rangle,
        \quad A_t = C_{il} - C_{ij}.

    Its exact program has one slack per triplet, :math:`\xi_t \ge 0` with :math:`\xi_t \ge h_t`
    (``d_M(x_i, x_l) - d_M(x_i, x_j) >= 1 - xi_t``) at the cost :math:`w \sum_t \ell(\xi_t)` (``loss.cvxpy``);
    as :math:`\ell` is non-decreasing, the optimal slack is :math:`[h_t]_+`. The exact backend keeps only a
    working set of triplets (those with ``h_t > -margin`` at some iterate) and adds violators until none is
    left outside it; only triplets with :math:`h_t > 0` ever cost anything, whatever the loss.

    For a problem with per-anchor weights (``problem.sample_weight``, weighted LMNN) every triplet's loss is
    multiplied by its anchor's weight ``w_i`` (``problem.anchor_weights``): in the value, in the slack costs of
    the exact program and, through the active set's ``mask``, in the JAX piece.

    The JAX piece evaluates the hinge arguments of the active set through one linear map
    (:meth:`jax_margins`) and the gradient through its adjoint (:meth:`jax_adjoint`), with the weights
    :math:`\ell'(h_t)`: ``-weight * A^T(l'(h))``. A non-smooth loss (the hinge) is smoothed to the backend's
    width (``loss.jax_value``), a smooth one is minimised as it is.

    ``TripletLoss(loss, weight, margin=0.1)``: ``loss`` a :class:`~metricopt.losses.ScalarLoss`, one of the names
    ``"hinge"``, ``"squared_hinge"``, ``"smooth_hinge"`` or a loss configuration dict. The hinge gives a
    :class:`TripletHinge` (dual piece ``"triplet_hinge"``); any other loss a term of the class
    ``TripletLoss.specialised(type(loss))`` with the dual piece ``DualPiece(loss="triplet_loss", weight=weight)``
    and the loss object as ``term.loss`` (what the certificates read).
    """

    uses_working_set = True
    #: up to this many points the JAX piece works with dense ``n x n`` Gram and weight matrices
    #: (matrix products instead of per-triplet gathers of ``d``-vectors); above it, gathers
    DENSE_MAX_N = 4096
    #: the pair form's gradient flops (``2 (pairs + target pairs) d^2``) from which ``form="auto"`` measures it
    #: against the Laplacian form (:mod:`metricopt.costmodel`); below, a millisecond or less, it keeps the pair form
    MEASURE_ABOVE = 1e8
    #: the loss class the JAX piece applies (set on every concrete class: see :meth:`specialised`)
    loss_type: Any = None
    _specialised_classes: dict = {}

    def __init__(self, loss, weight, margin=0.1):
        self.loss = as_loss(loss)
        if self.loss_type is not None and type(self.loss) is not self.loss_type:
            raise InputError(f"{type(self).__name__} applies {self.loss_type.__name__}; got {type(self.loss).__name__}. "
                             "Build the term with TripletLoss(loss, weight).")
        self.weight = check_real(weight, "weight", low=0.0)  # convex for weight >= 0 only
        self.margin = check_real(margin, "margin", low=0.0)

    @classmethod
    def specialised(cls, loss_type: type) -> type:
        """The concrete term class of the loss class ``loss_type`` (made once, then reused): its JAX piece applies
        ``loss_type.jax_value``, and it is smoothed by the backend when the loss is not smooth.

        Parameters
        ----------
        loss_type : type
            A :class:`~metricopt.losses.ScalarLoss` subclass.

        Returns
        -------
        type
            The term class (:class:`TripletHinge` for the hinge).

        Raises
        ------
        InputError
            When ``loss_type`` is not a ScalarLoss subclass.
        """
        if loss_type is Hinge:
            return TripletHinge
        if not (isinstance(loss_type, type) and issubclass(loss_type, ScalarLoss)):
            raise InputError(f"TripletLoss needs a metricopt.losses.ScalarLoss subclass; got {loss_type!r}.")
        found = TripletLoss._specialised_classes.get(loss_type)
        if found is None:
            name = f"TripletLoss_{loss_type.__name__}"
            found = type(name, (TripletLoss,), {"loss_type": loss_type, "jax_smoothed": not loss_type.smooth,
                                                "__module__": __name__, "__qualname__": name})
            TripletLoss._specialised_classes[loss_type] = found
            globals().setdefault(name, found)  # importable by name (pickle)
        return found

    def value(self, problem: Any, V: Mapping[str, Any]) -> float:
        if self.weight == 0.0:
            return 0.0
        if type(self.loss) is Hinge:
            return self.weight * problem.hinge_sum(V["M"])
        return self.weight * problem.loss_sum(V["M"], self.loss)

    def initial_working_set(self, problem: Any, V: Mapping[str, Any]) -> np.ndarray:
        """The rows the exact backend's working-set loop starts from at the point ``V``.

        Parameters
        ----------
        problem : Problem
            The problem the term belongs to (its points, labels, pairs or triplets).
        V : dict
            The point: ``V["M"]`` the (d, d) metric (a numpy array), ``V["b"]`` the threshold where the problem
            has one.

        Returns
        -------
        ndarray
            The rows (int), one per constraint of the working set.
        """
        i, j, l, _ = problem.find_triplets(V["M"], self.margin)
        return np.stack([i, j, l], 1)

    def all_triplets(self, problem: Any) -> np.ndarray:
        """Every triplet ``(i, j, l)`` (only for small problems: used by the full textbook program).

        Parameters
        ----------
        problem : Problem
            The problem the term belongs to (its points, labels, pairs or triplets).

        Returns
        -------
        ndarray
            The rows (int).
        """
        y, T = problem.y, problem.target_neighbors
        n, k = T.shape
        out: Any = []
        for i in range(n):
            ls = np.flatnonzero(y != y[i])
            for jj in range(k):
                out.append(np.stack([np.full(ls.size, i), np.full(ls.size, T[i, jj]), ls], 1))
        if not out:
            return np.zeros((0, 3), np.int64)
        out = np.concatenate(out).astype(np.int64)
        w = problem.sample_weight
        return out if w is None else out[w[out[:, 0]] > 0]  # weight-0 anchors count nowhere

    def violators(self, problem: Any, V: Mapping[str, Any], ws: np.ndarray, slack: float = 1e-9,
                  max_add: int | None = None) -> tuple[np.ndarray, float]:
        """Triplets outside ``ws`` whose hinge argument ``1 + d_ij - d_il`` exceeds ``slack`` at ``V``.

        Returns ``(new_triplets, max_violation)``; new triplets are taken with the
        term's margin so that near-active ones enter the working set together, at
        most ``max_add`` of them (the most violated) when given.

        Parameters
        ----------
        problem : Problem
            The problem the term belongs to (its points, labels, pairs or triplets).
        V : dict
            The point: ``V["M"]`` the (d, d) metric (a numpy array), ``V["b"]`` the threshold where the problem
            has one.
        ws : ndarray
            The current working set (rows).
        slack : float
            Violations up to this are ignored.
        max_add : int or None
            At most this many new rows (the most violated); ``None``: all.

        Returns
        -------
        new : ndarray
            The violated rows outside ``ws`` (empty when the largest violation is at most ``slack``).
        worst : float
            The largest violation outside ``ws`` (``-inf`` when none).
        """
        i, j, l, h = problem.find_triplets(V["M"], self.margin)
        cand = np.stack([i, j, l], 1)
        if ws.shape[0]:
            n = problem.n
            key = lambda t: (t[:, 0] * n + t[:, 1]) * n + t[:, 2]
            new = ~member(key(cand), key(ws))
        else:
            new = np.ones(cand.shape[0], dtype=bool)
        worst = float(h[new].max()) if np.any(new) else -np.inf
        if worst <= slack:
            return cand[:0], worst
        cand, h = cand[new], h[new]
        if max_add is not None and cand.shape[0] > max_add:
            # keep the most violated: adding everything after a round whose restricted
            # optimum shrank M would flood the working set with triplets inactive at the optimum
            top = np.argpartition(-h, max_add - 1)[:max_add]
            cand = cand[np.sort(top)]
        return cand, worst

    def cvxpy(self, problem: Any, V: Mapping[str, Any], ws: Any = None) -> tuple[Any, list]:
        ws = np.zeros((0, 3), np.int64) if ws is None else ws
        if ws.shape[0] == 0 or self.weight == 0.0:
            return cp.Constant(0.0), []
        A = problem.triplet_rows(ws[:, 0], ws[:, 1], ws[:, 2])
        if problem.geometry.blocks is not None:
            # lifted rows touch at most two diagonal blocks of vec(M~): pass them sparse
            import scipy.sparse

            A = scipy.sparse.csr_matrix(A)
        xi = cp.Variable(ws.shape[0], nonneg=True, name="xi")
        w = _anchor_weights(problem, ws[:, 0])
        cost = self.loss.cvxpy(xi)  # the hinge: xi itself
        cost = cp.sum(cost) if w is None else w @ cost
        return self.weight * cost, [A @ V["Mvec"] >= 1 - xi]

    def dual_piece(self, problem: Any) -> DualPiece | None:
        return DualPiece(loss="triplet_loss", weight=self.weight)

    # ------------------------------------------------------------ JAX piece
    has_jax = True

    def jax_data(self, problem: Any) -> dict:
        X = problem.X_lifted  # multi-metric LMNN: one copy of the points per metric
        Xc = X - X.mean(axis=0)  # pair differences and Laplacians ignore translations
        T = problem.target_neighbors
        a, b = problem.lift(np.repeat(np.arange(problem.n), T.shape[1]), T.ravel())
        data = {
            "weight": np.float64(self.weight),
            "Xc": Xc,
            # x_i - x_j for the n*k target pairs (i, j = T[i, kk]), row p = i * k + kk
            "DT": Xc[a] - Xc[b],
            # the rows of Xc of the target pairs (their Laplacian in the adjoint)
            "Ta": np.asarray(a, dtype=np.int32),
            "Tb": np.asarray(b, dtype=np.int32),
        }
        # the loss's parameters (e.g. the Huber hinge's width), passed on to loss.jax_value
        data.update({f"loss_{k}": np.float64(v) for k, v in self.loss.jax_params().items()})
        return data

    def jax_active_set(self, problem: Any, M: np.ndarray, margin: float, min_capacity: int = 256, multiple: int = 1,
                       limit: int | None = None, min_pair_capacity: int = 256,
                       form: str = "auto", device_pairs: bool = False) -> tuple[dict, int, float, np.ndarray] | None:
        """The triplets with hinge argument ``h > -margin`` at ``M`` (a full blocked search with
        :func:`metricopt.constraints.active_triplets`, memory ``O(block * n)``), padded to a
        bucketed capacity (the next power of two) so that the jitted loop compiles once per
        bucket, not at every change of the set.

        Returns ``None`` when more than ``limit`` triplets are active, else
        ``(active, size, exact_value, h)``: ``active`` holds ``p`` (target-pair row
        ``i * k + kk``), ``i``, ``l`` (int32) and ``mask`` (float64, 0 on padding, 1 on the triplets,
        or the anchor's weight ``w_i > 0`` for a weighted problem, so that the JAX value and gradient
        are weighted); ``exact_value`` is the term over *every* triplet at ``M`` (``weight * sum
        w_i loss(h)``, float64) and ``h`` the (padded) hinge arguments of the active triplets.

        The **form** of the JAX piece (:meth:`jax_margins`, :meth:`jax_adjoint`) follows from what ``active``
        holds. In the pair forms (``"pairs"``, ``"laplacian"``) it also holds the distinct impostor pairs
        ``(i, l)`` of the set: their differences ``DU`` (float64, one row per pair, padded to its own
        power-of-two capacity, at least ``min_pair_capacity``) and each triplet's pair ``u`` (int32); the
        Laplacian form adds the pairs' rows ``ui``, ``ul``. ``"auto"`` takes the dense form where
        :meth:`jax_dense` says so, else the pair form, or the Laplacian form where the gradient costs at least
        :data:`MEASURE_ABOVE` flops and the Laplacian one ran faster on these arrays (:mod:`metricopt.costmodel`: measured once
        per device, shapes and process); ``"gather"`` is the per-triplet form (no pair arrays: the shapes depend on the capacity alone,
        as a batch of problems needs).

        Parameters
        ----------
        problem : Problem
            The problem the term belongs to (its points, labels, pairs or triplets).
        M : (d, d) ndarray
            The metric.
        margin : float
            Triplets with hinge argument above ``-margin`` are active.
        min_capacity : int, default 256
            The smallest padded capacity.
        multiple : int, default 1
            The capacity is rounded up to a multiple of this (devices it is sharded over).
        limit : int or None
            Give up (``None``) above this many active triplets.
        min_pair_capacity : int, default 256
            The smallest padded capacity of the distinct impostor pairs (pair forms).
        form : {"auto", "pairs", "laplacian", "gather"}, default "auto"
            The JAX piece's form (above).
        device_pairs : bool, default False
            In the pair forms, hold the distinct pairs' rows ``DU_rows`` (int32, ``(capacity, 2)``, padding ``(0, 0)``)
            instead of their differences ``DU``: :meth:`to_device` then forms ``DU`` on the device, from the points
            already there (at 60,000 x 164 and 2 million pairs, ``DU`` is 2.7 GB that the host would otherwise gather,
            pad and copy at every re-check).

        Returns
        -------
        tuple or None
            ``(active, size, exact_value, h)`` as described above, or ``None`` above ``limit``.
        """
        if form not in ("auto", "pairs", "laplacian", "gather"):
            raise InputError(f"form must be 'auto', 'pairs', 'laplacian' or 'gather'; got {form!r}.")
        T = problem.target_neighbors
        k = T.shape[1]
        found = problem.find_triplets(M, margin, limit=limit)
        if found is None:  # more than ``limit``: the caller rejects the iterate
            return None
        i, j, l, h = found
        kk = np.argmax(T[i] == j[:, None], axis=1)  # target slot of j (targets of i are distinct)
        size = int(i.size)
        cap = max(int(min_capacity), 1 << max(size - 1, 0).bit_length())
        cap = -(-cap // multiple) * multiple  # divisible by the number of devices it is sharded over
        active: dict[str, np.ndarray] = {"p": np.zeros(cap, np.int32), "i": np.zeros(cap, np.int32),
                                         "l": np.zeros(cap, np.int32), "mask": np.zeros(cap, np.float64)}
        active["p"][:size] = i * k + kk
        active["i"][:size], active["l"][:size] = problem.lift(i, l)  # rows of the lifted points
        w = _anchor_weights(problem, i)
        active["mask"][:size] = 1.0 if w is None else w  # weight-0 anchors: never found (see find_triplets)
        Xl = problem.X_lifted
        if form != "gather" and not (form == "auto" and self.jax_dense(Xl.shape[0], cap)):
            self._pair_arrays(active, size, Xl, T.size, min_pair_capacity, multiple, form, device_pairs)
        hp = np.full(cap, -np.inf)
        hp[:size] = h
        pos = h > 0
        vals = self.loss.value(h[pos])  # the hinge: h itself, bit for bit
        total = math.fsum(vals.tolist()) if w is None else math.fsum((w[pos] * vals).tolist())
        return active, size, self.weight * total, hp  # as hinge_sum / loss_sum: exactly rounded

    @staticmethod
    def _pair_arrays(active: dict, size: int, X: np.ndarray, n_targets: int, min_capacity: int, multiple: int,
                     form: str, device_pairs: bool = False) -> None:
        """Add the distinct impostor pairs of ``active``'s first ``size`` triplets (rows of the lifted points
        ``X``): ``DU`` (their differences, padded with zero rows; with ``device_pairs`` their rows ``DU_rows``
        instead), ``u`` (each triplet's pair), and for the Laplacian form ``ui``, ``ul``; see
        :meth:`jax_active_set`."""
        n = X.shape[0]
        key = active["i"][:size].astype(np.int64) * n + active["l"][:size]
        pairs, inverse = np.unique(key, return_inverse=True)
        npairs = int(pairs.size)
        pcap = max(int(min_capacity), 1 << max(npairs - 1, 0).bit_length())
        pcap = -(-pcap // multiple) * multiple
        a, b = pairs // n, pairs % n
        if device_pairs:
            rows = np.zeros((pcap, 2), np.int32)
            rows[:npairs, 0], rows[:npairs, 1] = a, b
            active["DU_rows"] = rows
        else:
            DU = np.zeros((pcap, X.shape[1]))
            DU[:npairs] = X[a] - X[b]
            active["DU"] = DU
        active["u"] = np.zeros(active["i"].shape[0], np.int32)
        active["u"][:size] = inverse.reshape(-1)
        ui, ul = np.zeros(pcap, np.int32), np.zeros(pcap, np.int32)
        ui[:npairs], ul[:npairs] = a, b
        worth = 2.0 * (pcap + n_targets) * X.shape[1] ** 2 >= TripletLoss.MEASURE_ABOVE
        if form == "laplacian" or (form == "auto" and worth
                                   and TripletLoss._laplacian_measured_faster(active, X, ui, ul, n_targets)):
            active["ui"], active["ul"] = ui, ul

    @staticmethod
    def _laplacian_measured_faster(active: dict, X: np.ndarray, ui: np.ndarray, ul: np.ndarray,
                                   n_targets: int) -> bool:
        """Whether the Laplacian form of :meth:`jax_adjoint` ran faster than the pair form on these arrays
        (:func:`metricopt.costmodel.cheapest`: timed once per device, shapes and process; the target pairs are
        stood in for by as many random pairs of the points), unless a bucket within a factor 2 of these capacities
        was measured with a clear winner (:func:`metricopt.costmodel.decided`)."""
        import jax
        import jax.numpy as jnp

        from .. import costmodel

        n, d = X.shape
        key = ("triplet_adjoint", jax.devices()[0].platform, n, d, active["i"].shape[0],
               TripletLoss.pair_capacity(active), n_targets)
        known = costmodel.choices().get(key)
        if known is not None:  # measured already: no arrays to build or move to the device
            return known[0] == "laplacian"

        def close(other):  # the same computation, device, points and targets; capacities within a factor 2
            return (len(other) == len(key) and other[:4] == key[:4] and other[6] == key[6]
                    and all(0.5 <= other[q] / max(key[q], 1) <= 2.0 for q in (4, 5)))

        clear = costmodel.decided(close)
        if clear is not None:  # a nearby bucket's clear winner (CLEAR_WIN): not timed again
            return clear == "laplacian"
        rng = np.random.default_rng(0)
        Ta, Tb = (rng.integers(0, n, n_targets).astype(np.int32) for _ in range(2))
        with jax.enable_x64(True):
            Xc = X - X.mean(axis=0)
            data = {"Xc": jnp.asarray(Xc), "DT": jnp.asarray(Xc[Ta] - Xc[Tb]), "Ta": jnp.asarray(Ta),
                    "Tb": jnp.asarray(Tb)}
            pairs = TripletLoss.to_device(active, X)
            laplacian = {**pairs, "ui": jnp.asarray(ui), "ul": jnp.asarray(ul)}
            w = jnp.asarray(active["mask"] * rng.random(active["mask"].shape[0]))
            adjoint = jax.jit(TripletLoss.jax_adjoint)
            winner = costmodel.cheapest(key, {"pairs": lambda: adjoint(data, pairs, w),
                                              "laplacian": lambda: adjoint(data, laplacian, w)})
        return winner == "laplacian"

    @staticmethod
    def pair_capacity(active: dict) -> int:
        """The distinct pairs' padded capacity of an active set in a pair form (``DU`` or ``DU_rows``), else 0.

        Parameters
        ----------
        active : dict
            An active set of :meth:`jax_active_set`.

        Returns
        -------
        int
            The capacity.
        """
        for key in ("DU", "DU_rows"):
            if key in active:
                return int(active[key].shape[0])
        return 0

    @staticmethod
    def to_device(active: dict, X: Any) -> dict:
        """The active set as JAX arrays: a set holding its distinct pairs' rows (``DU_rows``, :meth:`jax_active_set`
        with ``device_pairs``) gets their differences ``DU = X[a] - X[b]`` formed on the device (the same
        subtractions as on the host, bit for bit; padding rows ``(0, 0)`` give zero rows).

        Parameters
        ----------
        active : dict
            An active set of :meth:`jax_active_set` (NumPy arrays).
        X : (n, d) array_like
            The (lifted) points, a JAX array already on the device or a NumPy array.

        Returns
        -------
        dict
            JAX arrays, ``DU`` in place of ``DU_rows``.
        """
        import jax.numpy as jnp

        out = {k: jnp.asarray(v) for k, v in active.items() if k != "DU_rows"}
        if "DU_rows" in active:
            out["DU"] = _row_differences(jnp.asarray(X), jnp.asarray(active["DU_rows"]))
        return out

    @staticmethod
    def jax_dense(n: int, capacity: int) -> bool:
        """Whether the JAX piece uses dense ``n x n`` matrices (static: from the shapes): when the
        active set is large against ``n^2`` (gathers of ``capacity`` ``d``-vectors would cost more
        than ``n x n`` matrix products) and ``n <= DENSE_MAX_N``.

        Parameters
        ----------
        n : int
            The number of (lifted) points.
        capacity : int
            The active set's padded capacity.

        Returns
        -------
        bool
            Whether the dense form is used.
        """
        return n <= TripletLoss.DENSE_MAX_N and 4 * capacity >= n * n

    @staticmethod
    def jax_margins(data: Any, M: Any, active: Any) -> Any:
        """The linear map ``A(M)_t = <C_il - C_ij, M> = d_M(x_i, x_l) - d_M(x_i, x_j)`` over the
        active set (hinge argument ``h_t = 1 - A(M)_t``).

        With a large active set and up to ``DENSE_MAX_N`` points (:meth:`jax_dense`) the impostor distances come from the Gram matrix
        ``G = X M X^T`` (``d_il = G_ii + G_ll - 2 G_il``: one ``n x n`` product, then a scalar
        gather per triplet); above it, from explicit differences gathered per triplet
        (memory ``O(|active| d)``, no ``n x n`` array) otherwise. In the pair forms
        (:meth:`jax_active_set`), ``d_il`` is ``diag(D_U M D_U^T)`` over the distinct impostor pairs' differences
        ``D_U`` (one ``P x d`` by ``d x d`` product), read per triplet by a scalar gather.

        Parameters
        ----------
        data : dict
            The arrays of :meth:`jax_data` (as JAX arrays).
        M : jax.Array
            The (d, d) metric.
        active : dict
            The padded active set (``p``, ``i``, ``l``, ``mask``).

        Returns
        -------
        jax.Array
            ``A(M)_t`` for every row of the active set.
        """
        import jax.numpy as jnp

        Xc, DT = data["Xc"], data["DT"]
        dT = jnp.einsum("pd,pd->p", DT @ M, DT)
        if "DU" in active:  # the pair forms: one product over the distinct impostor pairs, a scalar gather per triplet
            DU = active["DU"]
            return jnp.einsum("ud,ud->u", DU @ M, DU)[active["u"]] - dT[active["p"]]
        i, l = active["i"], active["l"]
        if TripletLoss.jax_dense(Xc.shape[0], i.shape[0]):
            G = (Xc @ M) @ Xc.T
            q = jnp.diagonal(G)
            dI = q[i] + q[l] - 2.0 * G[i, l]
        else:
            DI = Xc[i] - Xc[l]
            dI = jnp.einsum("td,td->t", DI @ M, DI)
        return dI - dT[active["p"]]

    @staticmethod
    def jax_adjoint(data: Any, active: Any, w: Any) -> Any:
        """The adjoint ``A^T w = sum_t w_t (C_il - C_ij)`` as one weighted graph Laplacian,
        ``X^T (D - W - W^T) X`` with ``W`` holding ``+w_t`` on the impostor pair ``(i, l)`` and
        ``-w_t`` on the target pair ``(i, j)`` of every triplet and ``D`` its degrees (never one
        triplet at a time): ``W X`` and ``D`` are segment sums (in the dense case, :meth:`jax_dense`,
        the impostor part of ``W`` is scattered into an ``n x n`` matrix), then two ``n x d`` by
        ``d x n`` products. ``w`` must vanish on padding. In the pair form (:meth:`jax_active_set`) it is
        ``D_U^T diag(w_U) D_U - D_T^T diag(w_T) D_T`` over the distinct impostor and target pairs' differences
        (``w_U``, ``w_T``: the triplets' weights summed per pair), two GEMMs and no gathers of ``d``-vectors;
        the Laplacian form gathers the distinct pairs' rows once (not once per triplet). Which is cheaper
        depends on the device (:mod:`metricopt.costmodel`).

        Parameters
        ----------
        data : dict
            The arrays of :meth:`jax_data` (as JAX arrays).
        active : dict
            The padded active set (``p``, ``i``, ``l``, ``mask``).
        w : jax.Array
            The weights ``w_t`` (0 on padding).

        Returns
        -------
        jax.Array
            The symmetric (d, d) matrix ``A^T w``.
        """
        import jax
        import jax.numpy as jnp

        Xc, Ta, Tb = data["Xc"], data["Ta"], data["Tb"]
        n, npairs = Xc.shape[0], Ta.shape[0]
        p, i, l = active["p"], active["i"], active["l"]
        seg = lambda v, idx: jax.ops.segment_sum(v, idx, num_segments=n)
        wT = jax.ops.segment_sum(w, p, num_segments=npairs)  # the target pairs' weights, entering with sign -1
        if "DU" in active and "ui" not in active:  # the pair form: D_U^T diag(w_U) D_U - D_T^T diag(w_T) D_T
            DU, DT = active["DU"], data["DT"]
            wU = jax.ops.segment_sum(w, active["u"], num_segments=DU.shape[0])
            S = (DU * wU[:, None]).T @ DU - (DT * wT[:, None]).T @ DT
            return 0.5 * (S + S.T)
        # impostor pairs (i, l)
        if "DU" in active:  # the Laplacian form over the distinct pairs (rows ui, ul)
            wU = jax.ops.segment_sum(w, active["u"], num_segments=active["DU"].shape[0])
            ui, ul = active["ui"], active["ul"]
            deg = seg(wU, ui) + seg(wU, ul)
            R = seg(wU[:, None] * Xc[ul], ui)
        elif TripletLoss.jax_dense(n, i.shape[0]):
            W = jnp.zeros((n, n), w.dtype).at[i, l].add(w)
            deg = jnp.sum(W, axis=1) + jnp.sum(W, axis=0)
            R = W @ Xc
        else:
            deg = seg(w, i) + seg(w, l)
            R = seg(w[:, None] * Xc[l], i)  # W X
        # target pairs (i, j): the weights summed onto the n*k pairs, entering W with the opposite sign
        deg = deg - seg(wT, Ta) - seg(wT, Tb)
        R = R - seg(wT[:, None] * Xc[Tb], Ta)
        XtR = Xc.T @ R
        S = (Xc * deg[:, None]).T @ Xc - XtR - XtR.T
        return 0.5 * (S + S.T)

    @staticmethod
    def _loss_params(data):
        return {k[5:]: v for k, v in data.items() if k.startswith("loss_")}

    @classmethod
    def jax_value_grad(cls, data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> tuple[Any, Any, dict]:
        """Matrix form of the (sub)gradient: ``-weight * A^T w = weight * (S_target(w) - S_impostor(w))``
        with ``w_t = phi'(h_t)``, ``phi`` the loss (smoothed to width ``s`` where it is not smooth: for the
        hinge ``1[h_t > 0]`` at ``s = 0``); see :meth:`jax_adjoint`.

        Parameters
        ----------
        data : dict
            The arrays of :meth:`jax_data` (as JAX arrays).
        V : dict
            The point, a dict of JAX arrays (``V["M"]`` symmetric; ``V["b"]`` where the problem has a
            threshold).
        active : dict or None
            The padded active set of a working-set loss (``jax_active_set``); unused by other terms.
        smoothing : float
            The smoothing width of a non-smooth term (0: the exact value).

        Returns
        -------
        value : jax.Array
            The (smoothed) value a solver minimises.
        exact_value : jax.Array
            The unsmoothed value.
        gradients : dict
            The gradient of ``value`` for each variable the term depends on (``"M"`` symmetric).
        """
        import jax.numpy as jnp

        mu, mask = data["weight"], active["mask"]
        params = cls._loss_params(data)
        h = 1.0 - cls.jax_margins(data, V["M"], active)
        phi, w = cls.loss_type.jax_value(h, smoothing, **params)
        value = mu * jnp.sum(phi * mask)
        exact = mu * jnp.sum(cls.loss_type.jax_exact(h, **params) * mask) if cls.jax_smoothed else value
        return value, exact, {"M": -mu * cls.jax_adjoint(data, active, w * mask)}

    @classmethod
    def jax_value(cls, data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> Any:
        """The (smoothed) value alone, in pure JAX (a classmethod here: the loss class is the term class's).

        Parameters
        ----------
        data : dict
            The arrays of :meth:`jax_data` (as JAX arrays).
        V : dict
            The point, a dict of JAX arrays (``V["M"]`` symmetric).
        active : dict
            The padded active set (``jax_active_set``).
        smoothing : float
            The smoothing width of a non-smooth loss (0: the exact value).

        Returns
        -------
        jax.Array
            The scalar value (smoothed to ``smoothing`` where the loss is not smooth).
        """
        import jax.numpy as jnp

        h = 1.0 - cls.jax_margins(data, V["M"], active)
        phi, _ = cls.loss_type.jax_value(h, smoothing, **cls._loss_params(data))
        return data["weight"] * jnp.sum(phi * active["mask"])

    def describe(self) -> str:
        return f"TripletLoss({self.loss.name}, weight={self.weight:g})"

    def config(self) -> dict | None:
        return {"term": "TripletLoss", "loss": self.loss.config(), "weight": float(self.weight),
                "margin": float(self.margin)}


@register
class TripletHinge(TripletLoss):
    """``weight * sum_{i, j in N_k(i), l: y_l != y_i} [1 + d_M(x_i, x_j) - d_M(x_i, x_l)]_+``.

    The LMNN push term (Weinberger & Saul, JMLR 2009, Eq. 14, second sum): :class:`TripletLoss` with the
    hinge (:class:`metricopt.losses.Hinge`). Its exact program has one slack ``xi_ijl >= 0`` per triplet
    with ``d_M(x_i, x_l) - d_M(x_i, x_j) >= 1 - xi_ijl``; the exact backend keeps only a
    working set of triplets (those with ``1 + d_ij - d_il > -margin`` at some iterate)
    and adds violators until none is left outside it. Its JAX piece smooths the hinge
    (:func:`smoothed_hinge`, the width driven down by the backend), and its dual piece is
    ``"triplet_hinge"`` (multipliers in ``[0, weight w_i]``, chosen by a restricted dual program).

    For a problem with per-anchor weights (``problem.sample_weight``, weighted LMNN) every triplet's
    hinge is multiplied by its anchor's weight ``w_i`` (``problem.anchor_weights``): in the value,
    in the slack costs of the exact program and, through the active set's ``mask``, in the JAX piece.
    """

    loss_type = Hinge
    #: the JAX piece smooths the hinge (the backend drives the width down)
    jax_smoothed = True

    def __init__(self, weight, margin=0.1):
        super().__init__(Hinge(), weight, margin)

    def dual_piece(self, problem: Any) -> DualPiece | None:
        return DualPiece(loss="triplet_hinge", weight=self.weight)

    def describe(self) -> str:
        return f"TripletHinge(weight={self.weight:g})"

    def config(self) -> dict | None:
        return {"term": "TripletHinge", "weight": float(self.weight), "margin": float(self.margin)}


# the term classes of the built-in losses exist from import on (importable by name, e.g. by pickle)
for _loss_type in (SquaredHinge, SmoothHinge):
    TripletLoss.specialised(_loss_type)
del _loss_type


@register
class SqrtDistances(Term):
    """``weight * sum_{(a,b) in pairs} sqrt(d_M(x_a, x_b))`` (MMC's objective with weight -1).

    Convex for ``weight <= 0`` (a negated sum of concave functions of ``M``).
    """

    def __init__(self, pairs, weight=-1.0):
        self.pairs = np.asarray(pairs, dtype=np.int64)
        self.weight = check_real(weight, "weight")
        self.convex = self.weight <= 0

    def distances(self, problem: Any, M: np.ndarray) -> np.ndarray:
        """The squared distances ``d_M(x_a, x_b)`` of the term's pairs.

        Parameters
        ----------
        problem : Problem
            The problem the term belongs to (its points, labels, pairs or triplets).
        M : (d, d) ndarray
            The metric.

        Returns
        -------
        (m,) ndarray
            One distance per pair.
        """
        return problem.pair_distances(self.pairs[:, 0], self.pairs[:, 1], M)

    def value(self, problem: Any, V: Mapping[str, Any]) -> float:
        return self.weight * float(np.sum(np.sqrt(np.maximum(self.distances(problem, V["M"]), 0.0))))

    def cvxpy(self, problem: Any, V: Mapping[str, Any], ws: Any = None) -> tuple[Any, list]:
        # u_l <= sqrt(t_l) as the 3-d second-order cone ||(2 u_l, t_l - 1)|| <= t_l + 1, where
        # t_l = cone_scale * d_M is the distance in the solver's O(1) scale; sqrt(d_M) = u_l / sqrt(cone_scale)
        sc = float(V.get("cone_scale", 1.0))
        if "_T" not in V:
            t = problem.pair_rows(self.pairs[:, 0], self.pairs[:, 1]) @ V["Mvec"] * sc
        else:  # M = T Z T^T (the problem's variable_basis): d_M = (T^T (x_a - x_b))^T Z (T^T (x_a - x_b)), the
            # whitened differences formed in float64 first (their products with M's entries of order cond(S)
            # would cancel)
            E = _pair_differences(problem, self.pairs) @ V["_T"]
            t = cp.sum(cp.multiply(E @ V["_M"], E), axis=1) * sc
        u = cp.Variable(len(self.pairs), name="sqrt_d")
        return self.weight * cp.sum(u) / np.sqrt(sc), [cp.SOC(t + 1, cp.vstack([2 * u, t - 1]), axis=0)]

    def dual_piece(self, problem: Any) -> DualPiece | None:
        return DualPiece(loss="sqrt_distances", weight=self.weight)

    has_jax = True

    def jax_data(self, problem: Any) -> dict:
        # the diagonal variant differs only in its feasible set (the backend's projection keeps M diagonal)
        # smoothing scale: the median root distance at the identity metric (scaled onto MMC's budget)
        sq = problem.pair_distances(self.pairs[:, 0], self.pairs[:, 1], np.eye(problem.d))
        S = problem.geometry.budget  # MMC's similar-pair scatter (None without a budget)
        if S is not None:
            sq = sq / max(float(np.trace(S)), 1e-300)
        return {**_pair_jax_data(problem, self.pairs), "weight": np.float64(self.weight),
                "scale": np.float64(max(np.median(np.sqrt(sq)), 1e-300))}

    #: the square root is smoothed near 0 (``sqrt(d + eps^2)``, ``eps = smoothing * scale``): pairs at
    #: distance 0 (an optimum may have them) have no gradient otherwise
    jax_smoothed = True

    @staticmethod
    def _roots(data, V, smoothing):
        import jax.numpy as jnp

        dist = jnp.maximum(_jax_pair_distances(data, V["M"]), 0.0)
        eps = smoothing * data["scale"]
        return jnp.sqrt(dist + eps * eps), jnp.sqrt(dist)

    @staticmethod
    def jax_value(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> Any:
        import jax.numpy as jnp

        return data["weight"] * jnp.sum(SqrtDistances._roots(data, V, smoothing)[0])

    @staticmethod
    def jax_value_grad(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> tuple[Any, Any, dict]:
        """Gradient ``weight * sum_t C_t / (2 sqrt(d_t + eps^2))`` as one weighted scatter
        ``D^T diag(w) D`` (for ``eps = 0``, ``d_t`` floored at the smallest normal float).

        Parameters
        ----------
        data : dict
            The arrays of :meth:`jax_data` (as JAX arrays).
        V : dict
            The point, a dict of JAX arrays (``V["M"]`` symmetric; ``V["b"]`` where the problem has a
            threshold).
        active : dict or None
            The padded active set of a working-set loss (``jax_active_set``); unused by other terms.
        smoothing : float
            The smoothing width of a non-smooth term (0: the exact value).

        Returns
        -------
        value : jax.Array
            The (smoothed) value a solver minimises.
        exact_value : jax.Array
            The unsmoothed value.
        gradients : dict
            The gradient of ``value`` for each variable the term depends on (``"M"`` symmetric).
        """
        import jax.numpy as jnp

        smooth, root = SqrtDistances._roots(data, V, smoothing)
        w = 0.5 / jnp.maximum(smooth, jnp.sqrt(jnp.finfo(smooth.dtype).tiny))
        return (data["weight"] * jnp.sum(smooth), data["weight"] * jnp.sum(root),
                {"M": data["weight"] * _jax_pair_scatter(data, w)})

    def describe(self) -> str:
        return f"SqrtDistances({len(self.pairs)} pairs, weight={self.weight:g})"


@register
class PairHinge(Term):
    """``C * sum_t [1 - y_t (b - d_M(x_t, x'_t))]_+`` (soft-margin POLA, one slack per pair)."""

    def __init__(self, pairs, labels, C):
        self.pairs = np.asarray(pairs, dtype=np.int64)
        self.labels = np.asarray(labels, dtype=np.float64)
        self.C = check_real(C, "C", low=0.0)

    def margins(self, problem: Any, V: Mapping[str, Any]) -> np.ndarray:
        """The margins ``y_t (b - d_M(x_t, x'_t))`` of the term's pairs at ``V``.

        Parameters
        ----------
        problem : Problem
            The problem the term belongs to (its points, labels, pairs or triplets).
        V : dict
            The point: ``V["M"]`` the (d, d) metric (a numpy array), ``V["b"]`` the threshold where the problem
            has one.

        Returns
        -------
        (m,) ndarray
            One margin per pair.
        """
        d = problem.pair_distances(self.pairs[:, 0], self.pairs[:, 1], V["M"])
        return self.labels * (float(V["b"]) - d)

    def value(self, problem: Any, V: Mapping[str, Any]) -> float:
        return self.C * float(np.sum(np.maximum(1.0 - self.margins(problem, V), 0.0)))

    def cvxpy(self, problem: Any, V: Mapping[str, Any], ws: Any = None) -> tuple[Any, list]:
        A = problem.pair_rows(self.pairs[:, 0], self.pairs[:, 1])
        xi = cp.Variable(len(self.pairs), nonneg=True, name="xi")
        margin = cp.multiply(self.labels, V["b"] - A @ V["Mvec"])
        return self.C * cp.sum(xi), [margin >= 1 - xi]

    def dual_piece(self, problem: Any) -> DualPiece | None:
        return DualPiece(loss="pair_hinge", weight=self.C)

    has_jax = True
    jax_smoothed = True

    def jax_data(self, problem: Any) -> dict:
        return {**_pair_jax_data(problem, self.pairs), "y": self.labels, "C": np.float64(self.C)}

    @staticmethod
    def jax_hinge_arguments(data: Any, V: Any) -> Any:
        """``h_t = 1 - y_t (b - d_M(x_t, x'_t))`` for every pair.

        Parameters
        ----------
        data : dict
            The arrays of :meth:`jax_data` (as JAX arrays).
        V : dict
            The point, a dict of JAX arrays (``V["M"]``, ``V["b"]``).

        Returns
        -------
        jax.Array
            One hinge argument per pair.
        """
        return 1.0 - data["y"] * (V["b"] - _jax_pair_distances(data, V["M"]))

    @staticmethod
    def jax_value(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> Any:
        import jax.numpy as jnp

        phi, _ = smoothed_hinge(PairHinge.jax_hinge_arguments(data, V), smoothing)
        return data["C"] * jnp.sum(phi)

    @staticmethod
    def jax_value_grad(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> tuple[Any, Any, dict]:
        """``dh_t/dM = y_t C_t`` and ``dh_t/db = -y_t``: the ``M`` gradient is one weighted scatter
        ``C D^T diag(y phi_s'(h)) D``.

        Parameters
        ----------
        data : dict
            The arrays of :meth:`jax_data` (as JAX arrays).
        V : dict
            The point, a dict of JAX arrays (``V["M"]`` symmetric; ``V["b"]`` where the problem has a
            threshold).
        active : dict or None
            The padded active set of a working-set loss (``jax_active_set``); unused by other terms.
        smoothing : float
            The smoothing width of a non-smooth term (0: the exact value).

        Returns
        -------
        value : jax.Array
            The (smoothed) value a solver minimises.
        exact_value : jax.Array
            The unsmoothed value.
        gradients : dict
            The gradient of ``value`` for each variable the term depends on (``"M"`` symmetric).
        """
        import jax.numpy as jnp

        h = PairHinge.jax_hinge_arguments(data, V)
        phi, w = smoothed_hinge(h, smoothing)
        C = data["C"]
        yw = data["y"] * w
        return (C * jnp.sum(phi), C * jnp.sum(jnp.maximum(h, 0.0)),
                {"M": C * _jax_pair_scatter(data, yw), "b": -C * jnp.sum(yw)})

    def describe(self) -> str:
        return f"PairHinge({len(self.pairs)} pairs, C={self.C:g})"
