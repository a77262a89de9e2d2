"""Balance: the centre of mass kept over the support point, a task below the goals.

The centre of mass (COM) of the skeleton in model space is ``c = (sum_b m_b x_b + m_0 x_0) / M``
with ``x_b = head_b + R_b o_b`` the mass point of bone b (its mass-weighted centroid, an offset
``o_b`` in the bone's frame: the bone and the bones rigidly attached to it), ``m_0, x_0`` the
mass that no DOF moves, and M the total mass. Its Jacobian column for DOF j is
``(1/M) sum_{b moved by j} m_b (w_j x (x_b - head_j))`` for a rotation about axis ``w_j``
through ``head_j`` and ``(1/M) sum m_b w_j`` for a translation (Buss 2009 section 2 for each
mass point, summed; a bone's stretch moves its children, not its own mass point).

The task has two rows: the horizontal (world, orthogonal to ``up``) components of
``support - c``, with ``support`` the midpoint of the support goals' targets (e.g. the feet).
It runs as a secondary task in the null space of the goals (solve.py), so it never costs a
goal its accuracy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import GoalError
from .skeleton import ROT_POST, STRETCH, Kinematics, Skeleton
from .so3 import Array


@dataclass
class Balance:
    """Masses for the centre-of-mass task.

    mass: (B,) each skeleton bone's mass (with what is rigidly attached to it), >= 0.
    center: (B, 3) or (F, B, 3) its mass point in the bone's frame (head = origin).
    weight: the task's weight in [0, 1]: 1 a full step, lower a softer one (its rows scaled by
        sqrt(weight) in the damped step: the damping grows as 1/weight); 0 only measures
        (``SolveResult.balance_distance``).
    fixed_mass, fixed_center: mass that no DOF moves, at a model-space point (3,) or (F, 3).
    up: the world's up axis; the task keeps the COM's horizontal position over the support.
    """

    mass: ArrayLike
    center: ArrayLike
    weight: float = 1.0
    fixed_mass: float = 0.0
    fixed_center: ArrayLike = (0.0, 0.0, 0.0)
    up: ArrayLike = (0.0, 0.0, 1.0)


@dataclass
class PreparedBalance:
    mass: Array  # (B,)
    center: Array  # (F, B, 3)
    weight: float
    fixed_mass: float
    fixed_center: Array  # (F, 3)
    horizontal: Array  # (2, 3) world horizontal axes
    total: float
    moves: NDArray[np.bool_]  # (B, n): DOF j moves bone b's mass point
    support: Array  # (F, 3) world support point

    def take(self, index: ArrayLike) -> PreparedBalance:
        i = np.asarray(index)
        return PreparedBalance(
            self.mass,
            self.center[i],
            self.weight,
            self.fixed_mass,
            self.fixed_center[i],
            self.horizontal,
            self.total,
            self.moves,
            self.support[i],
        )


def prepare_balance(
    balance: Balance, skel: Skeleton, frames: int, support: Array
) -> PreparedBalance:
    """Check ``balance`` against ``skel``; ``support`` (F, 3) the world support points."""
    nb = skel.n_bones
    mass = np.broadcast_to(np.asarray(balance.mass, dtype=float), (nb,)).copy()
    center = np.asarray(balance.center, dtype=float)
    if center.ndim == 2:
        center = center[None]
    if center.shape[1:] != (nb, 3) or center.shape[0] not in (1, frames):
        raise GoalError(f"balance center must have shape ({nb}, 3) or ({frames}, {nb}, 3)")
    center = np.broadcast_to(center, (frames, nb, 3)).copy()
    fixed = np.broadcast_to(np.asarray(balance.fixed_center, dtype=float), (frames, 3)).copy()
    values = [mass, center, fixed, np.array([balance.weight, balance.fixed_mass], dtype=float)]
    if not all(np.all(np.isfinite(v)) for v in values):
        raise GoalError("balance masses, centres and weight must be finite")
    if np.any(mass < 0) or balance.fixed_mass < 0:
        raise GoalError("balance masses must be >= 0")
    if not 0.0 <= balance.weight <= 1.0:
        # the weight scales the task's rows: in the damped null-space step it divides the
        # damping, so above 1 the step grows large near singular configurations
        raise GoalError(f"balance weight must be in [0, 1], got {balance.weight}")
    total = float(mass.sum() + balance.fixed_mass)
    if total <= 0:
        raise GoalError("balance: the bones have no mass")
    up = np.asarray(balance.up, dtype=float)
    if up.shape != (3,) or not np.linalg.norm(up) > 0:
        raise GoalError("balance up must be a non-zero 3-vector")
    up = up / np.linalg.norm(up)
    h1 = np.cross(up, [1.0, 0.0, 0.0] if abs(up[0]) < 0.9 else [0.0, 1.0, 0.0])
    h1 /= np.linalg.norm(h1)
    horizontal = np.stack([np.cross(h1, up), h1])  # (X, Y) for up = Z
    # moves[b, j]: the DOF's bone is b or an ancestor of b (a stretch: a strict ancestor)
    anc = np.zeros((nb, nb), dtype=bool)
    for b, p in enumerate(skel.parents):
        anc[b, b] = True
        if p >= 0:
            anc[b] |= anc[p]
    moves = anc[:, skel.dof_bone].copy()
    own = np.arange(nb)[:, None] == skel.dof_bone[None, :]
    moves &= ~(own & (skel.dof_kind == STRETCH)[None, :])
    return PreparedBalance(
        mass,
        center,
        float(balance.weight),
        float(balance.fixed_mass),
        fixed,
        horizontal,
        total,
        moves,
        np.asarray(support, dtype=float),
    )


def mass_points(kin: Kinematics, bal: PreparedBalance) -> Array:
    """(F, B, 3) model-space mass points of the bones."""
    return np.asarray(kin.head + np.einsum("fbij,fbj->fbi", kin.rot, bal.center))


def center_of_mass(kin: Kinematics, bal: PreparedBalance) -> Array:
    """(F, 3) the model-space centre of mass."""
    x = mass_points(kin, bal)
    return np.asarray(
        (np.einsum("b,fbi->fi", bal.mass, x) + bal.fixed_mass * bal.fixed_center) / bal.total
    )


def com_jacobian(skel: Skeleton, kin: Kinematics, bal: PreparedBalance) -> Array:
    """(F, 3, n) the model-space Jacobian of the centre of mass."""
    x = mass_points(kin, bal)
    weights = bal.mass[:, None] * bal.moves  # (B, n)
    m_j = weights.sum(axis=0)  # (n,) mass each DOF moves
    c_j = np.einsum("bn,fbi->fni", weights, x)  # (F, n, 3) its first moment
    axes = skel.dof_axes(kin)  # (F, n, 3)
    head = kin.head[:, skel.dof_bone]
    rot = skel.dof_kind <= ROT_POST
    cols = np.where(
        rot[None, :, None],
        np.cross(axes, c_j - m_j[None, :, None] * head),
        axes * m_j[None, :, None],
    )
    return np.asarray(np.swapaxes(cols, 1, 2) / bal.total)


def balance_rows(
    skel: Skeleton, kin: Kinematics, bal: PreparedBalance, lin: Array, trans: Array
) -> tuple[Array, Array]:
    """(F, 2) horizontal error support - COM (world) and its (F, 2, n) Jacobian rows."""
    world = np.einsum("fij,fj->fi", lin, center_of_mass(kin, bal)) + trans
    e = np.einsum("ki,fi->fk", bal.horizontal, bal.support - world)
    jac = np.einsum("ki,fij,fjn->fkn", bal.horizontal, lin, com_jacobian(skel, kin, bal))
    return e, jac


def balance_distance(kin: Kinematics, bal: PreparedBalance, lin: Array, trans: Array) -> Array:
    """(F,) the horizontal world distance of the centre of mass from the support point."""
    world = np.einsum("fij,fj->fi", lin, center_of_mass(kin, bal)) + trans
    return np.asarray(
        np.linalg.norm(np.einsum("ki,fi->fk", bal.horizontal, bal.support - world), axis=1)
    )
