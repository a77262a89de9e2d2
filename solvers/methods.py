"""The step of every method: dtheta from the (weighted) Jacobian J (F, m, n) and error e (F, m).

Each method is a small class that declares its parameters once (``parameters``: a ``Param``
each, with default, range, choices, unit and a one-line doc; the constructor validates from
them, and the Blender properties, panel, method menu and docs table are derived from them) and
one ``step``; the shared loop in ``solve.py`` owns everything else. One meaning per name:
``damping`` is the lambda of J^T (J J^T + lambda^2 I)^-1 (Buss 2009, Buss-Kim 2005), squared
where it enters; every other damping term (``damping0``, ``damping_max``, ``w_bar``, ``w_n``)
is the term added to J J^T (or J^T J) as it is, as Deo-Walker (1995) and Sugihara (2011)
write it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from .errors import SettingsError
from .so3 import Array


@dataclass
class StepContext:
    """What a step may need besides J and e. Arrays are over the frames being stepped."""

    energy: Array  # (F,) E_k = 1/2 e^T W_E e
    blocks: NDArray[
        np.intp
    ]  # (m,) which 3-row block (an effector's position or orientation) a row is
    n_blocks: int
    rotational: NDArray[np.bool_]  # (n,) rotational DOFs (clamped by SDLS and max_step)
    state: dict[str, Array]  # per-frame state of the method, (F, ...) for these frames
    stats: dict[str, list[float]] = field(default_factory=dict)


# -- shared linear algebra -----------------------------------------------------------------


def _solve_vec(a: Array, b: Array) -> Array:
    return np.asarray(np.linalg.solve(a, b[..., None])[..., 0], dtype=np.float64)


def _cholesky(a: Array) -> Array:
    return np.asarray(np.linalg.cholesky(a), dtype=np.float64)


def damped_solve(jac: Array, e: Array, lam2: Array) -> Array:
    """dtheta = J^T (J J^T + lam2 I)^-1 e, by Cholesky on the smaller normal matrix.

    With m rows and n columns, m <= n solves (J J^T + lam2 I) z = e, dtheta = J^T z; otherwise
    (J^T J + lam2 I) dtheta = J^T e (the same vector: Deo-Walker eqs. 3-4). Where the matrix is
    not positive definite (lam2 = 0 at a singularity) the SVD form with lam2 is used instead.
    """
    m, n = jac.shape[-2:]
    jt = np.swapaxes(jac, -1, -2)
    lam = lam2[:, None, None] * np.eye(min(m, n))
    try:
        # the Cholesky factorisation tells a positive definite matrix; one solve with the
        # matrix itself then costs a third of two solves with its triangular factors (numpy
        # has no batched triangular solve: it factorises each factor again)
        if m <= n:
            normal = jac @ jt + lam
            _cholesky(normal)
            return np.einsum("fnm,fm->fn", jt, _solve_vec(normal, e))
        normal = jt @ jac + lam
        _cholesky(normal)
        return _solve_vec(normal, np.einsum("fnm,fm->fn", jt, e))
    except np.linalg.LinAlgError:
        u, s, vt = np.linalg.svd(jac, full_matrices=False)
        return svd_apply(u, s, vt, e, _filter(s, lam2))


def _filter(s: Array, lam2: Array) -> Array:
    """sigma / (sigma^2 + lam2), the damped inverse of each singular value (0 where both vanish)."""
    den = s * s + lam2[:, None]
    tiny = s <= 1e-12 * np.maximum(s[:, :1], 1e-300)
    return np.where(tiny, 0.0, s / np.where(den > 0, den, 1.0))


def svd_apply(u: Array, s: Array, vt: Array, e: Array, tau: Array) -> Array:
    """sum_i tau_i v_i u_i^T e."""
    alpha = np.einsum("fmi,fm->fi", u, e)
    return np.einsum("fin,fi->fn", vt, tau * alpha)


def clamp_max_abs(dq: Array, bound: Array | float, rotational: NDArray[np.bool_]) -> Array:
    """ClampMaxAbs of Buss-Kim (2005): scale dq so no rotational component exceeds ``bound``.

    Translational DOFs are not measured (their first-order model is exact, section 4).
    """
    if not np.any(rotational):
        return dq
    peak = np.asarray(np.abs(dq[..., rotational]).max(axis=-1))
    b = np.broadcast_to(np.asarray(bound, dtype=float), peak.shape)
    # b / peak only where it clamps (elsewhere a huge bound over a tiny step overflowed)
    scale = np.divide(b, peak, out=np.ones_like(peak), where=peak > b)
    return dq * scale[..., None]


# -- parameter declarations ---------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """One parameter of a method, declared once: default, range (``low``/``high``, excluded
    where ``open_low``/``open_high``), ``choices`` for a string, Blender ``unit`` and a doc."""

    name: str
    default: float | str
    doc: str
    low: float = 0.0
    high: float = math.inf
    open_low: bool = False
    open_high: bool = False
    choices: tuple[str, ...] = ()
    unit: str = "NONE"  # Blender's FloatProperty unit: NONE, LENGTH, ROTATION

    def range_text(self) -> str:
        if self.choices:
            return " / ".join(self.choices)
        left = f"({self.low:g}" if self.open_low else f"[{self.low:g}"
        right = "inf)" if math.isinf(self.high) else f"{self.high:g}" + ")]"[not self.open_high]
        return f"{left}, {right}"

    def check(self, method: str, value: Any) -> Any:
        """``value`` as the solver uses it; SettingsError when out of range or not a choice."""
        if self.choices:
            if value not in self.choices:
                raise SettingsError(
                    f"{method}: {self.name} must be {', '.join(self.choices)}, got {value!r}"
                )
            return value
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise SettingsError(f"{method}: {self.name} must be a number, got {value!r}") from None
        below = v <= self.low if self.open_low else v < self.low
        above = v >= self.high if self.open_high else v > self.high
        if not math.isfinite(v) or below or above:
            raise SettingsError(
                f"{method}: {self.name} must be finite and in {self.range_text()}, got {value}"
            )
        return v


# -- the methods ---------------------------------------------------------------------------


class Method:
    """A method's step. Subclasses set ``name``, ``label`` (the menu's name), ``parameters``
    and implement ``step``; the class docstring's first paragraph is the menu's description."""

    name: ClassVar[str] = ""
    label: ClassVar[str] = ""
    parameters: ClassVar[tuple[Param, ...]] = ()
    defaults: ClassVar[dict[str, Any]] = {}  # derived from ``parameters``
    # whether zero rows (the goals of other IK trees, weighing nothing) leave the step as it is;
    # not for the methods whose damping reads the smallest singular values or their product
    zero_rows_neutral: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.defaults = {p.name: p.default for p in cls.parameters}

    @classmethod
    def summary(cls) -> str:
        """The docstring's first paragraph (the method menu's description)."""
        return " ".join((cls.__doc__ or "").split("\n\n")[0].split()).replace("``", "")

    def __init__(self, **params: Any) -> None:
        unknown = set(params) - set(self.defaults)
        if unknown:
            raise SettingsError(
                f"method {self.name!r} has no parameter {sorted(unknown)}; "
                f"its parameters are {sorted(self.defaults)}"
            )
        values = {**self.defaults, **params}
        self.params = {p.name: p.check(self.name, values[p.name]) for p in self.parameters}

    def initial_state(self, frames: int) -> dict[str, Array]:
        return {}

    def nullspace_damping(self, ctx: StepContext) -> Array | None:
        """The lam2 of this step's damped inverse, for Deo-Walker's (I - J* J) projection."""
        return None

    def step(self, jac: Array, e: Array, ctx: StepContext) -> Array:
        raise NotImplementedError


class Transpose(Method):
    """Jacobian transpose, dtheta = alpha J^T e with alpha = <e, J J^T e> / <J J^T e, J J^T e>
    (Buss 2009, eq. 5 and after; Buss-Kim 2005, section 5)."""

    name = "transpose"
    label = "Jacobian Transpose"

    def step(self, jac: Array, e: Array, ctx: StepContext) -> Array:
        g = np.einsum("fmn,fm->fn", jac, e)
        jg = np.einsum("fmn,fn->fm", jac, g)
        num = np.einsum("fm,fm->f", e, jg)
        den = np.einsum("fm,fm->f", jg, jg)
        alpha = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
        return alpha[:, None] * g


class Pseudoinverse(Method):
    """Truncated pseudoinverse by SVD: singular values below ``threshold`` times the largest
    are treated as zero (Tabaczynski 2006, 2.3). With ``halving_tolerance`` > 0 the error step
    is halved while ||(I - J J^+) e|| is above it (Tabaczynski 2006, 2.2, steps 3-4)."""

    zero_rows_neutral = False  # the SVD of extra zero rows rounds differently, and J^+ amplifies it

    name = "pseudoinverse"
    label = "Pseudoinverse"
    parameters = (
        Param("threshold", 0.01, "Singular values below this times the largest count as zero"),
        Param(
            "halving_tolerance",
            0.0,
            "Halve the error step while the residual exceeds this (0: off)",
        ),
    )

    def step(self, jac: Array, e: Array, ctx: StepContext) -> Array:
        u, s, vt = np.linalg.svd(jac, full_matrices=False)
        keep = s > self.params["threshold"] * s[:, :1]
        keep &= s > 0
        tau = np.where(keep, 1.0 / np.where(keep, s, 1.0), 0.0)
        dq = svd_apply(u, s, vt, e, tau)
        tol = self.params["halving_tolerance"]
        if tol > 0:
            alpha = np.einsum("fmi,fm->fi", u, e) * keep
            residual = np.linalg.norm(e - np.einsum("fmi,fi->fm", u, alpha), axis=1)
            # halving e halves the residual: the number of halvings is ceil(log2(r / tol))
            halvings = np.clip(np.ceil(np.log2(np.maximum(residual, 1e-300) / tol)), 0, 60)
            dq = dq * np.exp2(-halvings)[:, None]
        return dq


class GaussNewton(Pseudoinverse):
    """Gauss-Newton with the Moore-Penrose inverse (Sugihara 2011, eq. 10): the pseudoinverse
    truncated only at round-off (threshold 1e-12)."""

    name = "gauss_newton"
    label = "Gauss-Newton"
    parameters = (replace(Pseudoinverse.parameters[0], default=1e-12), Pseudoinverse.parameters[1])


class SteepestDescent(Method):
    """Gradient step of length E_k / (g^T g) along g = J^T W_E e (Sugihara 2011, eq. 19).

    No line search: the step size is that fixed formula."""

    name = "steepest_descent"
    label = "Steepest Descent"

    def step(self, jac: Array, e: Array, ctx: StepContext) -> Array:
        g = np.einsum("fmn,fm->fn", jac, e)
        gg = np.einsum("fn,fn->f", g, g)
        scale = np.where(gg > 0, ctx.energy / np.where(gg > 0, gg, 1.0), 0.0)
        return scale[:, None] * g


class DLS(Method):
    """Damped least squares with constant damping, J^T (J J^T + lambda^2 I)^-1 e (Buss 2009,
    eq. 10), solved by Cholesky. Buss-Kim use lambda 1.1 on the double-Y (links about 1 unit), 0.7
    with clamping; the default 0.1 suits character rigs with bones of a few tenths of a metre."""

    name = "dls"
    label = "Damped Least Squares"
    parameters = (Param("damping", 0.1, "Lambda (squared in J J^T + lambda^2 I)"),)

    def _lam2(self, ctx: StepContext) -> Array:
        return np.full(len(ctx.energy), self.params["damping"] ** 2)

    def nullspace_damping(self, ctx: StepContext) -> Array | None:
        return self._lam2(ctx)

    def step(self, jac: Array, e: Array, ctx: StepContext) -> Array:
        return damped_solve(jac, e, self._lam2(ctx))


class _SVDDamped(Method):
    """DLS whose damping comes from the singular values: dtheta = sum sigma/(sigma^2 + lam)
    v_i u_i^T e (Deo-Walker appendix A), with lam chosen by ``damping_from``."""

    zero_rows_neutral = False

    def damping_from(self, s: Array, alpha: Array, ctx: StepContext) -> Array:
        raise NotImplementedError

    def nullspace_damping(self, ctx: StepContext) -> Array | None:
        return ctx.state.get("last_lam")

    def step(self, jac: Array, e: Array, ctx: StepContext) -> Array:
        if min(jac.shape[1:]) == 0:  # no DOF or no row (a goal no DOF moves): no step
            ctx.state["last_lam"] = np.zeros(len(jac))
            return np.zeros((len(jac), jac.shape[2]))
        u, s, vt = np.linalg.svd(jac, full_matrices=False)
        alpha = np.einsum("fmi,fm->fi", u, e)
        lam = np.maximum(self.damping_from(s, alpha, ctx), 0.0)
        ctx.state["last_lam"] = lam
        return np.einsum("fin,fi->fn", vt, _filter(s, lam) * alpha)


def _manipulability(s: Array, rows: int) -> Array:
    """w = sqrt(det(J J^T)) = product of the m singular values (0 when n < m)."""
    if s.shape[1] < rows:
        return np.zeros(s.shape[0])
    return np.asarray(np.prod(s, axis=1))


class DLSNakamuraHanafusa(_SVDDamped):
    """lam = lam0 (1 - w/w_t)^2 below the manipulability threshold w_t, else 0 (Deo-Walker 3.2)."""

    name = "dls_nakamura_hanafusa"
    label = "DLS, Nakamura-Hanafusa"
    parameters = (
        Param("damping0", 0.1, "Largest damping term lam0, added to J J^T"),
        Param("threshold", 0.01, "Manipulability w_t below which damping starts", open_low=True),
    )

    def damping_from(self, s: Array, alpha: Array, ctx: StepContext) -> Array:
        w = _manipulability(s, ctx.blocks.shape[0])
        wt = self.params["threshold"]
        return np.where(w < wt, self.params["damping0"] * (1.0 - w / wt) ** 2, 0.0)


class DLSKelmar(_SVDDamped):
    """lam = lam0 (1 - w_k / w_k-1) when the manipulability ratio w_k / w_k-1 falls below
    w_t, else 0 (Kelmar et al., Deo-Walker 3.3). No damping on a frame's first step."""

    name = "dls_kelmar"
    label = "DLS, Kelmar-Khosla"
    parameters = (
        Param("damping0", 0.1, "Damping term lam0, added to J J^T"),
        Param("threshold", 1.0, "Manipulability ratio w_t below which damping starts"),
    )

    def initial_state(self, frames: int) -> dict[str, Array]:
        return {"previous_w": np.full(frames, np.nan)}

    def damping_from(self, s: Array, alpha: Array, ctx: StepContext) -> Array:
        w = _manipulability(s, ctx.blocks.shape[0])
        prev = ctx.state["previous_w"]
        ctx.state["previous_w"] = w
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(prev > 0, w / prev, np.inf)
        return np.where(
            ratio < self.params["threshold"], self.params["damping0"] * (1.0 - ratio), 0.0
        )


class DLSChanLawrence(_SVDDamped):
    """Error-damped pseudoinverse, lam = lam0 ||e||^2 (Chan-Lawrence, Deo-Walker eq. 5)."""

    name = "dls_chan_lawrence"
    label = "DLS, Chan-Lawrence"
    zero_rows_neutral = True  # its damping reads the error, not the singular values
    parameters = (Param("damping0", 1.0, "Factor lam0 of ||e||^2 in the damping term"),)

    def damping_from(self, s: Array, alpha: Array, ctx: StepContext) -> Array:
        return self.params["damping0"] * 2.0 * ctx.energy


class DLSMaciejewskiKlein(_SVDDamped):
    """Damping from the singular values (Maciejewski-Klein, Deo-Walker eqs. 6-8), by ``bound``:

    - "velocity" (eq. 6): lam = sigma_min / qdot_max - sigma_min^2 when sigma_min <= 1/qdot_max,
      the least damping keeping the joint speed per unit error below ``max_joint_speed``.
    - "error" (eq. 7): lam = sigma_r^2 dR / (1 - dR), the most damping keeping the relative
      tracking error below ``max_relative_error`` (sigma_r: smallest non-zero singular value).
    - "condition" (eq. 8): lam = (sigma_1^2 - k sigma_n^2) / (k - 1), bounding the condition
      number of J^T J + lam I by ``max_condition`` (sigma_n = 0 when m < n).
    """

    name = "dls_maciejewski_klein"
    label = "DLS, Maciejewski-Klein"
    parameters = (
        Param(
            "bound",
            "velocity",
            "What the damping bounds",
            choices=("velocity", "error", "condition"),
        ),
        Param("max_joint_speed", 10.0, "Joint speed per unit error (velocity)", open_low=True),
        Param(
            "max_relative_error",
            0.1,
            "Relative tracking error (error)",
            open_low=True,
            high=1.0,
            open_high=True,
        ),
        Param("max_condition", 100.0, "Condition number (condition)", low=1.0, open_low=True),
    )

    def damping_from(self, s: Array, alpha: Array, ctx: StepContext) -> Array:
        bound = self.params["bound"]
        if bound == "velocity":
            smin = s[:, -1]
            qmax = self.params["max_joint_speed"]
            return np.where(smin <= 1.0 / qmax, smin / qmax - smin**2, 0.0)
        if bound == "error":
            nonzero = s > 1e-12 * np.maximum(s[:, :1], 1e-300)
            sr = np.where(nonzero, s, np.inf).min(axis=1)
            sr = np.where(np.isfinite(sr), sr, 0.0)
            dr = self.params["max_relative_error"]
            return sr**2 * dr / (1.0 - dr)
        k = self.params["max_condition"]
        n_dofs = ctx.rotational.shape[0]
        sn = s[:, -1] if n_dofs <= s.shape[1] else np.zeros(len(s))  # sigma_n = 0 when m < n
        return (s[:, 0] ** 2 - k * sn**2) / (k - 1.0)


class DLSChiaverini(Method):
    """Chiaverini's weighted DLS (Deo-Walker 3.6): near a singularity (sigma_min < epsilon) the
    task direction d of the smallest singular value is weighted by W = I + (w - 1) d d^T and
    lam = (1 - (sigma_min/epsilon)^2) lam_max, (w - 1)^2 = (1 - (sigma_min/epsilon)^2)(w_min - 1)^2;
    dtheta = (J^T W^T W J + lam I)^-1 J^T W^T W e."""

    name = "dls_chiaverini"
    zero_rows_neutral = False
    label = "DLS, Chiaverini"
    parameters = (
        Param("epsilon", 0.1, "Smallest singular value below which damping starts", open_low=True),
        Param("damping_max", 0.1, "Largest damping term, added to J J^T"),
        Param(
            "weight_min",
            0.5,
            "Weight of the singular direction at the singularity",
            open_low=True,
            high=1.0,
        ),
    )

    def nullspace_damping(self, ctx: StepContext) -> Array | None:
        return ctx.state.get("last_lam")

    def step(self, jac: Array, e: Array, ctx: StepContext) -> Array:
        if min(jac.shape[1:]) == 0:  # no DOF or no row (a goal no DOF moves): no step
            ctx.state["last_lam"] = np.zeros(len(jac))
            return np.zeros((len(jac), jac.shape[2]))
        u, s, _ = np.linalg.svd(jac, full_matrices=False)
        m = jac.shape[1]
        smin, d = s[:, -1], u[:, :, -1]  # the smallest singular value and its task direction
        near = smin < self.params["epsilon"]
        f = np.where(near, 1.0 - (smin / self.params["epsilon"]) ** 2, 0.0)
        lam = f * self.params["damping_max"]
        wm1 = -np.sqrt(f) * (1.0 - self.params["weight_min"])  # w - 1 <= 0
        w_mat = np.eye(m)[None] + wm1[:, None, None] * np.einsum("fi,fj->fij", d, d)
        jw = w_mat @ jac
        ew = np.einsum("fij,fj->fi", w_mat, e)
        ctx.state["last_lam"] = lam
        uu, ss, vt = np.linalg.svd(jw, full_matrices=False)
        return svd_apply(uu, ss, vt, ew, _filter(ss, lam))


class DLSOptimal(Method):
    """Deo-Walker optimal damping (DLP-2): the smallest residual with ||dtheta|| <= Delta.

    lam = 0 (the pseudoinverse step) when that step is within ``max_norm``; otherwise lam solves
    phi(lam) = ||J^T (J J^T + lam I)^-1 e|| = Delta (eq. 11) by Newton's method on 1/phi (eq. 18),
    warm-started from the frame's previous lam and safeguarded by a bracket [lo, hi] that
    always contains the root (hi = ||J^T e|| / Delta, since phi(lam) < ||J^T e|| / lam).
    """

    name = "dls_optimal"
    label = "DLS, Optimal Damping"
    parameters = (
        Param("max_norm", 0.5, "Largest step norm Delta", open_low=True),
        Param(
            "newton_tolerance",
            1e-6,
            "Relative tolerance of the Newton iteration on lambda",
            open_low=True,
        ),
    )

    def initial_state(self, frames: int) -> dict[str, Array]:
        return {"lam": np.zeros(frames)}

    def nullspace_damping(self, ctx: StepContext) -> Array | None:
        return ctx.state.get("lam")

    def step(self, jac: Array, e: Array, ctx: StepContext) -> Array:
        u, s, vt = np.linalg.svd(jac, full_matrices=False)
        gamma = np.einsum("fmi,fm->fi", u, e)  # eq. 14
        s = np.where(s > 1e-12 * np.maximum(s[:, :1], 1e-300), s, 0.0)
        lam, iterations = optimal_damping(
            s, gamma, self.params["max_norm"], ctx.state["lam"], self.params["newton_tolerance"]
        )
        ctx.state["lam"] = lam
        ctx.stats.setdefault("newton_iterations", []).extend(iterations.tolist())
        return np.einsum("fin,fi->fn", vt, _filter(s, lam) * gamma)


def optimal_damping(
    s: Array, gamma: Array, delta: float, start: Array, tol: float = 1e-6, max_iter: int = 50
) -> tuple[Array, NDArray[np.intp]]:
    """Deo-Walker's optimal damping per frame: (lam, Newton iterations), see DLSOptimal."""
    s2g2 = (s * gamma) ** 2

    def phi(lam: Array) -> tuple[Array, Array]:
        den = s[None] ** 2 + lam[:, None] if s.ndim == 1 else s**2 + lam[:, None]
        ok = den > 0
        den = np.where(ok, den, 1.0)
        ph = np.sqrt(np.sum(np.where(ok, s2g2 / den**2, 0.0), axis=1))  # eq. 15
        dph = -np.sum(np.where(ok, s2g2 / den**3, 0.0), axis=1) / np.maximum(ph, 1e-300)  # eq. 16
        return ph, dph

    frames = len(gamma)
    lam = np.zeros(frames)
    phi0, _ = phi(lam)
    need = phi0 > delta * (1.0 + tol)
    iterations = np.zeros(frames, dtype=np.intp)
    if not np.any(need):
        return lam, iterations
    lo = np.zeros(frames)
    hi = np.sqrt(np.sum(s2g2, axis=1)) / delta  # ||J^T e|| / Delta
    lam = np.where(need, np.clip(start, lo, hi), 0.0)
    lam = np.where(need & (lam <= 0), hi * 1e-3, lam)
    active = need.copy()
    for _ in range(max_iter):
        ph, dph = phi(lam)
        done = np.abs(ph - delta) <= tol * delta
        active &= ~done
        if not np.any(active):
            break
        iterations += active
        lo = np.where(active & (ph > delta), lam, lo)
        hi = np.where(active & (ph < delta), lam, hi)
        step = (ph / delta) * (ph - delta) / np.where(dph < 0, dph, -1e-300)  # eq. 18
        new = lam - step
        bad = ~(new > lo) | ~(new < hi)
        new = np.where(bad, 0.5 * (lo + hi), new)
        lam = np.where(active, new, lam)
    return lam, iterations


class SDLS(Method):
    """Selectively damped least squares (Buss-Kim 2005, section 4, eqs. 3-4).

    Per singular triple: N_i = sum_l ||u_l,i|| over the 3-row blocks l, M_i = sigma_i^-1 sum_j
    |v_j,i| rho_j with rho_j = sum_l ||J_l,j||, gamma_i = min(1, N_i / M_i) gamma_max,
    phi_i = ClampMaxAbs(sigma_i^-1 alpha_i v_i, gamma_i), dtheta = ClampMaxAbs(sum phi_i,
    gamma_max). Translational DOFs are not clamped.
    """

    name = "sdls"
    label = "Selectively Damped"
    parameters = (
        Param(
            "gamma_max",
            math.pi / 4,
            "Largest joint change of a step",
            open_low=True,
            unit="ROTATION",
        ),
    )

    def step(self, jac: Array, e: Array, ctx: StepContext) -> Array:
        u, s, vt = np.linalg.svd(jac, full_matrices=False)
        nb = ctx.n_blocks
        # block norms: ||u_l,i|| (F, nb, r) and rho_l,j = ||J_l,j|| (F, nb, n)
        block_sum = (ctx.blocks[None, :] == np.arange(nb)[:, None]).astype(float)  # (nb, m)
        n_i = np.sqrt(block_sum @ u**2).sum(axis=1)  # (F, r)
        rho = np.sqrt(block_sum @ jac**2).sum(axis=1)  # (F, n)
        alpha = np.einsum("fmi,fm->fi", u, e)
        keep = s > 1e-12 * np.maximum(s[:, :1], 1e-300)
        inv = np.where(keep, 1.0 / np.where(keep, s, 1.0), 0.0)
        m_i = inv * np.einsum("fin,fn->fi", np.abs(vt), rho)
        gmax = self.params["gamma_max"]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(m_i > 0, n_i / m_i, 1.0)
        gamma = np.minimum(1.0, ratio) * gmax  # (F, r)
        phi = (inv * alpha)[:, :, None] * vt  # (F, r, n): sigma_i^-1 alpha_i v_i
        phi = clamp_max_abs(phi, gamma, ctx.rotational)  # eq. 3
        return clamp_max_abs(phi.sum(axis=1), gmax, ctx.rotational)  # eq. 4


class LM(Method):
    """Levenberg-Marquardt with Sugihara's damping W_N = E_k + w_bar (Sugihara 2011, eqs. 11-12
    and section III): dq = (J^T W_E J + W_N)^-1 J^T W_E e, with E_k = 1/2 e^T W_E e."""

    name = "lm"
    label = "Levenberg-Marquardt"
    parameters = (Param("w_bar", 1e-3, "Term w_bar added to the error damping E_k"),)

    def _lam2(self, ctx: StepContext) -> Array:
        return ctx.energy + self.params["w_bar"]

    def nullspace_damping(self, ctx: StepContext) -> Array | None:
        return self._lam2(ctx)

    def step(self, jac: Array, e: Array, ctx: StepContext) -> Array:
        return damped_solve(jac, e, self._lam2(ctx))


class LMConstant(LM):
    """LM with constant damping W_N = w_n I (Sugihara 2011, sec. IV: LM(lambda), lambda = w_n)."""

    name = "lm_constant"
    label = "LM, Constant Damping"
    parameters = (Param("w_n", 0.01, "Damping term W_N, added to J^T J"),)

    def _lam2(self, ctx: StepContext) -> Array:
        return np.full(len(ctx.energy), self.params["w_n"])


class LMChanLawrence(LM):
    """LM with Chan-Lawrence's error damping W_N = w_n_factor E_k (Sugihara 2011, eq. 14)."""

    name = "lm_chan_lawrence"
    label = "LM, Chan-Lawrence"
    parameters = (Param("w_n_factor", 1.0, "Factor of the error E_k in the damping term W_N"),)

    def _lam2(self, ctx: StepContext) -> Array:
        return self.params["w_n_factor"] * ctx.energy


METHODS: dict[str, type[Method]] = {
    cls.name: cls
    for cls in (
        Transpose,
        Pseudoinverse,
        GaussNewton,
        SteepestDescent,
        DLS,
        DLSNakamuraHanafusa,
        DLSKelmar,
        DLSChanLawrence,
        DLSMaciejewskiKlein,
        DLSChiaverini,
        DLSOptimal,
        SDLS,
        LM,
        LMConstant,
        LMChanLawrence,
    )
}


def make_method(name: str, params: dict[str, Any] | None = None) -> Method:
    """The method called ``name`` with ``params``; an unknown name is an error, never a default."""
    try:
        cls = METHODS[name]
    except KeyError:
        raise SettingsError(f"unknown method {name!r}; known methods: {sorted(METHODS)}") from None
    return cls(**(params or {}))
