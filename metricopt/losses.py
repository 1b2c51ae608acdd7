r"""Scalar losses of a triplet's hinge argument, each declared once with its value, its conjugate
and its CVXPY and JAX forms.

A triplet term (:class:`metricopt.problems.terms.TripletLoss`) charges every triplet
:math:`t = (i, j, l)` the loss :math:`\ell(h_t)` of its *hinge argument*

.. math::

    h_t = 1 + d_M(x_i, x_j) - d_M(x_i, x_l) = 1 - \langle A_t, M\rangle,
    \qquad A_t = C_{il} - C_{ij},

and with a weight :math:`w > 0` the term is :math:`w \sum_t \ell(h_t)`. Every loss here is convex,
non-decreasing and zero for :math:`h \le 0` (a triplet that meets its unit margin costs nothing).

Conjugates and the certificates
-------------------------------
The convex conjugate :math:`\ell^*(a) = \sup_h\, (a h - \ell(h))` is finite on an interval
:math:`[0, \bar a]` (``dual_upper``: :math:`\bar a = \sup_h \ell'(h)`) and, because :math:`\ell`
vanishes on :math:`h \le 0`, non-decreasing there. Writing each loss as its biconjugate,
:math:`w\,\ell(h) = \max_{0 \le \alpha \le w \bar a}\, \alpha h - w\,\ell^*(\alpha / w)`, gives for any
multipliers :math:`\alpha_t \in [0, w \bar a]` the weak-duality bound the certificates use
(:mod:`metricopt.certify.triplets`):

.. math::

    \sum_t \big(\alpha_t - w\,\ell^*(\alpha_t / w)\big)
    + \min_{M \succeq 0}\ \langle P - B, M\rangle + \tfrac{\lambda}{2}\|M\|_F^2,
    \qquad B = \sum_t \alpha_t A_t .

For a differentiable loss the choice :math:`\alpha_t = w\,\ell'(h_t)` at the optimum makes it tight
(Fenchel--Young equality :math:`\ell(h) + \ell^*(\ell'(h)) = h\,\ell'(h)`). :meth:`ScalarLoss.conjugate`
rounds *up* (a certificate subtracts it, so rounding may only lower the bound).

The losses
----------
* :class:`Hinge`: :math:`[h]_+`, LMNN's own (Weinberger & Saul, *Distance Metric Learning for Large
  Margin Nearest Neighbor Classification*, JMLR 10:207-244, 2009, Eq. 14);
  :math:`\ell^*(a) = 0` on :math:`[0, 1]`.
* :class:`SquaredHinge`: :math:`[h]_+^2`, the loss PyLMNN minimises (its documentation: "the problem
  solved by this implementation is with the squared hinge loss");
  :math:`\ell^*(a) = a^2 / 4` on :math:`a \ge 0`.
* :class:`SmoothHinge` of width :math:`s` (the "Huber hinge": the hinge with its kink replaced by a
  parabola, as in O. Chapelle, *Training a Support Vector Machine in the Primal*, Neural
  Computation 19(5):1155-1178, 2007): :math:`0` for :math:`h \le 0`, :math:`h^2 / (2s)` for
  :math:`0 < h < s`, :math:`h - s/2` for :math:`h \ge s`; :math:`\ell^*(a) = s a^2 / 2` on :math:`[0, 1]`.

New losses subclass :class:`ScalarLoss` and add themselves to :data:`LOSSES` (for
:func:`loss_from_config` and the names :class:`metricopt.LMNNProblem` accepts).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._validation import check_real
from .errors import InputError

__all__ = ["ScalarLoss", "Hinge", "SquaredHinge", "SmoothHinge", "LOSSES", "loss_from_config", "as_loss",
           "numerical_conjugate", "round_up", "smoothed_hinge"]

_EPS = float(np.finfo(np.float64).eps)


def smoothed_hinge(h: Any, s: Any) -> tuple[Any, Any]:
    r"""Centred Huber smoothing of ``[h]_+`` of width ``s`` and its derivative (JAX).

    ``phi_s(h) = 0`` for ``h <= -s/2``, ``(h + s/2)^2 / (2 s)`` for ``|h| < s/2`` and ``h``
    for ``h >= s/2``: ``[h]_+ <= phi_s <= [h]_+ + s/8`` and ``phi_s'`` is ``1/s``-Lipschitz.
    ``s = 0`` gives the hinge itself with the subgradient ``1[h > 0]``. The JAX backend smooths
    the hinges of LMNN (:class:`Hinge`) and of soft-margin POLA with it (also importable from
    :mod:`metricopt.problems.terms`, its former home).

    Parameters
    ----------
    h : jax.Array
        Hinge arguments :math:`h`.
    s : float
        The width :math:`s \ge 0`.

    Returns
    -------
    phi : jax.Array
        :math:`\phi_s(h)`.
    dphi : jax.Array
        :math:`\phi_s'(h)`.
    """
    import jax.numpy as jnp

    safe = jnp.where(s > 0, s, 1.0)
    u = h + 0.5 * s
    phi = jnp.where(h >= 0.5 * s, h, jnp.where(u > 0, u * u / (2.0 * safe), 0.0))
    dphi = jnp.where(s > 0, jnp.clip(u / safe, 0.0, 1.0), (h > 0).astype(h.dtype))
    return phi, dphi


def round_up(x: np.ndarray, roundings: int = 1) -> np.ndarray:
    r"""An upper bound on the exact value of a non-negative ``x`` computed with at most ``roundings``
    correctly rounded float64 operations (each of relative error at most :math:`u = \epsilon / 2`):
    :math:`x (1 + k\epsilon)` computed, then moved up by one ulp (which also covers the absolute
    errors of subnormal results and of this very product).

    (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., 2002, Sec. 2.2.)

    Parameters
    ----------
    x : array_like
        The computed non-negative value(s).
    roundings : int, default 1
        The number of correctly rounded operations.

    Returns
    -------
    ndarray
        The upper bound.
    """
    x = np.asarray(x, dtype=np.float64)
    return np.nextafter(x * (1.0 + roundings * _EPS), np.inf)


class ScalarLoss:
    r"""A convex, non-decreasing loss :math:`\ell(h)` of a triplet's hinge argument, zero for :math:`h \le 0`.

    Attributes
    ----------
    name : str
        The loss's name (``"hinge"``, ``"squared_hinge"``, ``"smooth_hinge"``), used in configurations.
    dual_upper : float
        :math:`\bar a = \sup_h \ell'(h)`, the right end of the conjugate's domain :math:`[0, \bar a]`
        (``inf`` for a loss that grows faster than linearly).
    smooth : bool
        Whether :math:`\ell` is differentiable (then the JAX backend minimises it as it is, without
        smoothing, and a certificate takes the multipliers :math:`\alpha_t = w\,\ell'(h_t)`).

    Subclasses implement :meth:`value`, :meth:`derivative`, :meth:`conjugate`, :meth:`cvxpy`,
    :meth:`jax_value` and :meth:`config`; a parameterised loss also :meth:`jax_params`.
    """

    name: str = "loss"
    dual_upper: float = math.inf
    smooth: bool = False

    def value(self, h: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        r""":math:`\ell(h)` elementwise (float64).

        Parameters
        ----------
        h : ndarray
            Hinge arguments :math:`h`.

        Returns
        -------
        ndarray
            The loss values.

        Raises
        ------
        NotImplementedError
            In the base class (abstract).
        """
        raise NotImplementedError

    def derivative(self, h: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        r"""A subgradient :math:`\ell'(h) \in [0, \bar a]` elementwise (float64).

        Parameters
        ----------
        h : ndarray
            Hinge arguments :math:`h`.

        Returns
        -------
        ndarray
            The (sub)derivatives.

        Raises
        ------
        NotImplementedError
            In the base class (abstract).
        """
        raise NotImplementedError

    def conjugate(self, a: np.ndarray) -> np.ndarray:
        r""":math:`\ell^*(a)` elementwise, rounded up; ``+inf`` outside :math:`[0, \bar a]`.

        Default: :func:`numerical_conjugate`, a rigorous upper bound from :meth:`value` and :meth:`derivative`
        alone, so that a new loss need not derive its conjugate (a closed form, where known, is faster).

        Parameters
        ----------
        a : ndarray
            Dual values :math:`a`.

        Returns
        -------
        ndarray
            Upper bounds on :math:`\ell^*(a)`.

        Raises
        ------
        InputError
            When the input holds NaN.
        """
        return numerical_conjugate(self, a)

    def cvxpy(self, xi: Any) -> Any:  # pragma: no cover - abstract
        r""":math:`\ell(\xi)` elementwise as a convex (DCP) CVXPY expression, for :math:`\xi \ge 0`.

        Parameters
        ----------
        xi : cvxpy.Expression
            The (non-negative) slacks :math:`\xi`.

        Returns
        -------
        cvxpy.Expression
            The loss of each slack.

        Raises
        ------
        NotImplementedError
            In the base class (abstract).
        """
        raise NotImplementedError

    @staticmethod
    def jax_value(h: Any, smoothing: Any) -> tuple[Any, Any]:  # pragma: no cover - abstract
        """``(phi, dphi)``: the loss the JAX backend minimises and its derivative, in JAX. A non-smooth loss
        is smoothed to width ``smoothing`` (0: the loss itself and a subgradient); a smooth loss ignores it.
        Parameters of the loss (:meth:`jax_params`) come as keyword arguments.

        Parameters
        ----------
        h : jax.Array
            Hinge arguments :math:`h`.
        smoothing : float
            The smoothing width (0: the loss itself; ignored by a smooth loss).

        Returns
        -------
        phi : jax.Array
            The (smoothed) loss values.
        dphi : jax.Array
            Their derivatives.

        Raises
        ------
        NotImplementedError
            In the base class (abstract).
        """
        raise NotImplementedError

    @classmethod
    def jax_exact(cls, h: Any, **params: Any) -> Any:
        r"""The unsmoothed :math:`\ell(h)` in JAX (default: :meth:`jax_value` at width 0).

        Parameters
        ----------
        h : jax.Array
            Hinge arguments :math:`h`.
        **params
            The loss's parameters (:meth:`jax_params`).

        Returns
        -------
        jax.Array
            The loss values.
        """
        return cls.jax_value(h, 0.0, **params)[0]

    def jax_params(self) -> dict:
        """The loss's parameters as float64 scalars, passed to :meth:`jax_value` as keyword arguments
        (dynamic inputs of the jitted loop). Default: none.

        Returns
        -------
        dict
            Parameter name -> float64 scalar.
        """
        return {}

    def config(self) -> dict:
        """The loss as a JSON-serialisable dict ``{"loss": name, **parameters}`` (see :func:`loss_from_config`).

        Returns
        -------
        dict
            The configuration.
        """
        return {"loss": self.name}

    def _array(self, x, what):
        x = np.asarray(x, dtype=np.float64)
        if np.isnan(x).any():
            raise InputError(f"{type(self).__name__}.{what} got NaN; pass finite (or infinite) numbers.")
        return x

    def __eq__(self, other):
        return type(other) is type(self) and other.config() == self.config()

    def __hash__(self):
        return hash((type(self).__name__, tuple(sorted(self.config().items()))))

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.config().items() if k != "loss")
        return f"{type(self).__name__}({args})"


class Hinge(ScalarLoss):
    r"""The hinge :math:`\ell(h) = [h]_+ = \max(h, 0)` (LMNN, Weinberger & Saul, JMLR 2009, Eq. 14).

    Its conjugate is the indicator of :math:`[0, 1]`: :math:`\ell^*(a) = 0` for :math:`0 \le a \le 1`,
    ``+inf`` elsewhere; the subgradient used is :math:`1[h > 0]`. In JAX it is smoothed by the centred
    Huber :func:`smoothed_hinge` (width driven down by the backend).
    """

    name = "hinge"
    dual_upper = 1.0
    smooth = False

    def value(self, h: np.ndarray) -> np.ndarray:
        return np.maximum(self._array(h, "value"), 0.0)

    def derivative(self, h: np.ndarray) -> np.ndarray:
        return (self._array(h, "derivative") > 0).astype(np.float64)

    def conjugate(self, a: np.ndarray) -> np.ndarray:
        a = self._array(a, "conjugate")
        return np.where((a >= 0) & (a <= 1.0), 0.0, np.inf)

    def cvxpy(self, xi: Any) -> Any:
        r""":math:`\ell(\xi)` elementwise as a convex (DCP) CVXPY expression, for :math:`\xi \ge 0`.

        Parameters
        ----------
        xi : cvxpy.Expression
            The (non-negative) slacks :math:`\xi`.

        Returns
        -------
        cvxpy.Expression
            ``xi`` itself.
        """
        return xi

    @staticmethod
    def jax_value(h: Any, smoothing: Any) -> tuple[Any, Any]:
        return smoothed_hinge(h, smoothing)

    @classmethod
    def jax_exact(cls, h: Any, **params: Any) -> Any:
        r"""The unsmoothed :math:`\ell(h)` in JAX.

        Parameters
        ----------
        h : jax.Array
            Hinge arguments :math:`h`.
        **params
            The loss's parameters (:meth:`jax_params`).

        Returns
        -------
        jax.Array
            The loss values.
        """
        import jax.numpy as jnp

        return jnp.maximum(h, 0.0)


class SquaredHinge(ScalarLoss):
    r"""The squared hinge :math:`\ell(h) = [h]_+^2` (PyLMNN's loss; smooth, :math:`\ell'(h) = 2[h]_+`).

    Conjugate: :math:`\ell^*(a) = \sup_{h \ge 0} (a h - h^2) = a^2 / 4` for :math:`a \ge 0` (attained at
    :math:`h = a / 2`), ``+inf`` for :math:`a < 0`; the dual multipliers are unbounded above
    (``dual_upper = inf``).
    """

    name = "squared_hinge"
    dual_upper = math.inf
    smooth = True

    def value(self, h: np.ndarray) -> np.ndarray:
        p = np.maximum(self._array(h, "value"), 0.0)
        return p * p

    def derivative(self, h: np.ndarray) -> np.ndarray:
        return 2.0 * np.maximum(self._array(h, "derivative"), 0.0)

    def conjugate(self, a: np.ndarray) -> np.ndarray:
        a = self._array(a, "conjugate")
        with np.errstate(over="ignore"):
            up = round_up((a * a) * 0.25, 2)  # one rounding in a * a (the power-of-two factor is exact or subnormal)
        return np.where(a < 0, np.inf, np.where(a == 0, 0.0, up))

    def cvxpy(self, xi: Any) -> Any:
        import cvxpy as cp

        return cp.square(xi)

    @staticmethod
    def jax_value(h: Any, smoothing: Any) -> tuple[Any, Any]:
        import jax.numpy as jnp

        p = jnp.maximum(h, 0.0)
        return p * p, 2.0 * p


class SmoothHinge(ScalarLoss):
    r"""The Huber hinge of width :math:`s > 0`: the hinge with its kink rounded off by a parabola,

    .. math::

        \ell_s(h) = \begin{cases} 0 & h \le 0 \\ h^2 / (2s) & 0 < h < s \\ h - s/2 & h \ge s \end{cases}
        \qquad \ell_s'(h) = \min(\max(h / s, 0), 1),

    (O. Chapelle, *Training a Support Vector Machine in the Primal*, Neural Computation 19(5), 2007, uses
    this smoothing of the hinge). :math:`[h]_+ - s/2 \le \ell_s(h) \le [h]_+` and :math:`\ell_s'` is
    :math:`1/s`-Lipschitz. Conjugate: :math:`\ell_s^*(a) = s a^2 / 2` on :math:`[0, 1]` (attained at
    :math:`h = a s`), ``+inf`` elsewhere.

    Parameters
    ----------
    width : float > 0, default 0.5
        The width :math:`s` of the parabolic piece (in units of the unit margin).
    """

    name = "smooth_hinge"
    dual_upper = 1.0
    smooth = True

    def __init__(self, width: float = 0.5) -> None:
        self.width = check_real(width, "width", low=0.0, low_open=True)

    def value(self, h: np.ndarray) -> np.ndarray:
        h = self._array(h, "value")
        s = self.width
        return np.where(h <= 0, 0.0, np.where(h < s, h * h / (2.0 * s), h - 0.5 * s))

    def derivative(self, h: np.ndarray) -> np.ndarray:
        return np.clip(self._array(h, "derivative") / self.width, 0.0, 1.0)

    def conjugate(self, a: np.ndarray) -> np.ndarray:
        a = self._array(a, "conjugate")
        up = round_up((self.width * a) * a * 0.5, 3)  # two roundings in the products, one in the halving (subnormal)
        return np.where((a < 0) | (a > 1.0), np.inf, np.where(a == 0, 0.0, up))

    def cvxpy(self, xi: Any) -> Any:
        import cvxpy as cp

        # cp.huber(x, s) = x^2 for |x| <= s, 2 s |x| - s^2 beyond: divided by 2 s, the Huber hinge for x >= 0
        return cp.huber(xi, self.width) / (2.0 * self.width)

    @staticmethod
    def jax_value(h: Any, smoothing: Any, width: Any = 0.5) -> tuple[Any, Any]:
        """``(phi, dphi)``: the loss the JAX backend minimises and its derivative, in JAX.

        Parameters
        ----------
        h : jax.Array
            Hinge arguments :math:`h`.
        smoothing : float
            The smoothing width (0: the loss itself; ignored by a smooth loss).
        width : float, default 0.5
            The width :math:`s` (from :meth:`jax_params`).

        Returns
        -------
        phi : jax.Array
            The (smoothed) loss values.
        dphi : jax.Array
            Their derivatives.
        """
        import jax.numpy as jnp

        phi = jnp.where(h <= 0, 0.0, jnp.where(h < width, h * h / (2.0 * width), h - 0.5 * width))
        return phi, jnp.clip(h / width, 0.0, 1.0)

    def jax_params(self) -> dict:
        """The loss's parameters as float64 scalars (keyword arguments of :meth:`jax_value`).

        Returns
        -------
        dict
            Parameter name -> float64 scalar.
        """
        return {"width": np.float64(self.width)}

    def config(self) -> dict:
        return {"loss": self.name, "width": float(self.width)}


#: the bracket search of :func:`numerical_conjugate`: the largest hinge argument tried, and the halvings
NUMERICAL_CONJUGATE_HMAX = 1e8
NUMERICAL_CONJUGATE_STEPS = 80


def numerical_conjugate(loss: ScalarLoss, a: np.ndarray) -> np.ndarray:
    r"""An upper bound on :math:`\ell^*(a) = \sup_{h \ge 0}\, (a h - \ell(h))` computed from the loss's value and
    derivative only (for a convex, non-decreasing :math:`\ell` that is 0 for :math:`h \le 0`).

    For :math:`a \ge 0`, bisection on :math:`\ell'` finds :math:`h_{lo} \le h_{hi}` with :math:`\ell'(h_{lo}) \le a
    \le \ell'(h_{hi})`: the concave :math:`a h - \ell(h)` is non-decreasing left of :math:`h_{lo}` and non-increasing
    right of :math:`h_{hi}`, so its supremum is attained in :math:`[h_{lo}, h_{hi}]`, where the tangent of
    :math:`\ell` at :math:`h_{lo}` (:math:`\ell(h) \ge \ell(h_{lo}) + \ell'(h_{lo})(h - h_{lo})`) gives

    .. math::

        a h - \ell(h) \le (a - \ell'(h_{lo}))\, h_{hi} + \ell'(h_{lo})\, h_{lo} - \ell(h_{lo}),

    rounded up. The bound is exact in the limit (the bracket shrinks to the maximiser) and never below
    :math:`\ell^*(a)`. ``+inf`` for :math:`a < 0` and where no :math:`h \le` :data:`NUMERICAL_CONJUGATE_HMAX` has
    :math:`\ell'(h) \ge a` (the supremum may be infinite there: a multiplier at or beyond the loss's largest slope).

    Parameters
    ----------
    loss : ScalarLoss
        The loss (its ``value`` and ``derivative``).
    a : ndarray
        Dual values :math:`a`.

    Returns
    -------
    ndarray
        Upper bounds on :math:`\ell^*(a)`.
    """
    a = np.asarray(a, dtype=np.float64)
    out = np.full(a.shape, np.inf)
    ok = a >= 0
    if not ok.any():
        return out
    aa = a[ok]
    hi = np.full(aa.shape, NUMERICAL_CONJUGATE_HMAX)
    reach = loss.derivative(hi) >= aa
    lo = np.zeros(aa.shape)
    for _ in range(NUMERICAL_CONJUGATE_STEPS):
        mid = 0.5 * (lo + hi)
        up = loss.derivative(mid) >= aa
        hi = np.where(up, mid, hi)
        lo = np.where(up, lo, mid)
    dlo = loss.derivative(lo)
    # (a - l'(lo)) h_hi >= 0, l'(lo) lo >= 0, and -l(lo) <= 0: each term rounded up, then the sum
    first = round_up(np.maximum(aa - dlo, 0.0) * hi, 2)
    second = round_up(dlo * lo, 1)
    third = -np.asarray(loss.value(lo), dtype=np.float64)
    total = first + second + third
    bound = np.nextafter(total + 4 * _EPS * (first + second + np.abs(third)), np.inf)
    out[ok] = np.where(reach, np.maximum(bound, 0.0), np.inf)
    return out


#: the built-in losses by name (the names :class:`metricopt.LMNNProblem` accepts for ``loss``)
LOSSES: dict[str, type] = {cls.name: cls for cls in (Hinge, SquaredHinge, SmoothHinge)}


def loss_from_config(config: dict) -> ScalarLoss:
    """The loss described by ``config`` (the dict of :meth:`ScalarLoss.config`); an unknown name or arguments
    the loss does not take raise :class:`~metricopt.errors.InputError`.

    Parameters
    ----------
    config : dict
        The dict of :meth:`ScalarLoss.config`.

    Returns
    -------
    ScalarLoss
        The loss.

    Raises
    ------
    InputError
        When ``config`` is not a dict with a ``"loss"`` name, the name is unknown or the loss does not take the
        arguments.
    """
    if not isinstance(config, dict) or "loss" not in config:
        raise InputError(f"a loss's configuration must be a dict with a 'loss' name, e.g. {{'loss': 'hinge'}}; "
                         f"got {config!r}.")
    cls = LOSSES.get(config["loss"])
    if cls is None:
        raise InputError(f"unknown loss {config['loss']!r}; known losses: {', '.join(sorted(LOSSES))}.")
    args = {k: v for k, v in config.items() if k != "loss"}
    try:
        return cls(**args)
    except TypeError as exc:
        raise InputError(f"cannot rebuild the loss {config['loss']!r} from {args}: {exc}") from None


def as_loss(loss: Any, name: str = "loss") -> ScalarLoss:
    """``loss`` as a :class:`ScalarLoss`: a loss object as it is, a name of :data:`LOSSES` (case-insensitive;
    the built-in defaults, e.g. ``SmoothHinge(width=0.5)``) or a configuration dict; anything else raises
    :class:`~metricopt.errors.InputError` naming the accepted values.

    Parameters
    ----------
    loss : ScalarLoss, str or dict
        The loss, its name or its configuration.
    name : str, default "loss"
        The argument's name in messages.

    Returns
    -------
    ScalarLoss
        The loss.

    Raises
    ------
    InputError
        For anything else.
    """
    if isinstance(loss, ScalarLoss):
        return loss
    if isinstance(loss, dict):
        return loss_from_config(loss)
    if isinstance(loss, str) and loss.lower() in LOSSES:
        return LOSSES[loss.lower()]()
    accepted = ", ".join(repr(k) for k in LOSSES)
    raise InputError(f"{name} must be one of {accepted} or a metricopt.losses.ScalarLoss instance (e.g. "
                     f"metricopt.losses.SmoothHinge(width=0.2)); got {loss!r}.")
