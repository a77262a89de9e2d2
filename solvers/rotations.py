"""Rotation conversions in Blender's conventions, batched over leading axes (numpy only).

Conventions (the same as Blender's ``mathutils``):
- Matrices act on column vectors; a rotation matrix has shape (..., 3, 3).
- Quaternions are (w, x, y, z).
- Euler angles are stored as (x, y, z) whatever the order. The order names the axes in the
  order they are applied: "XYZ" means R = Rz(z) @ Ry(y) @ Rx(x).
- Axis-angle is (angle, x, y, z), the layout of ``PoseBone.rotation_axis_angle``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

EULER_ORDERS = ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")
_AXIS = {"X": 0, "Y": 1, "Z": 2}
_TAU = 2.0 * np.pi

FloatArray = NDArray[np.float64]


def _order_axes(order: str) -> tuple[int, int, int, bool]:
    """Axis indices (i, j, k) applied first to last, and whether the order is an odd permutation."""
    if order not in EULER_ORDERS:
        raise ValueError(f"unknown Euler order {order!r}; expected one of {EULER_ORDERS}")
    i, j, k = (_AXIS[c] for c in order)
    odd = (j - i) % 3 != 1
    return i, j, k, odd


def _axis_rotation(axis: int, angle: FloatArray) -> FloatArray:
    """Rotation matrices (..., 3, 3) about one coordinate axis."""
    c, s = np.cos(angle), np.sin(angle)
    out = np.zeros((*np.shape(angle), 3, 3))
    a, b = (axis + 1) % 3, (axis + 2) % 3
    out[..., axis, axis] = 1.0
    out[..., a, a] = c
    out[..., b, b] = c
    out[..., b, a] = s
    out[..., a, b] = -s
    return out


def matrix_from_euler(angles: ArrayLike, order: str = "XYZ") -> FloatArray:
    """Rotation matrices (..., 3, 3) from Euler angles (..., 3) (radians, stored as x, y, z)."""
    e = np.asarray(angles, dtype=np.float64)
    i, j, k, _ = _order_axes(order)
    return (
        _axis_rotation(k, e[..., k]) @ _axis_rotation(j, e[..., j]) @ _axis_rotation(i, e[..., i])
    )


def euler_from_matrix(matrix: ArrayLike, order: str = "XYZ") -> FloatArray:
    """Euler angles (..., 3) of rotation matrices (..., 3, 3); middle angle in [-pi/2, pi/2].

    Follows Blender's ``mat3_normalized_to_eulO`` (first solution): for an even order (i, j, k)
    with R = R_k(c) R_j(b) R_i(a), b = atan2(-R[k, i], cos b), a = atan2(R[k, j], R[k, k]),
    c = atan2(R[j, i], R[i, i]); odd orders negate the angles of the even formula.
    """
    m = np.asarray(matrix, dtype=np.float64)
    i, j, k, odd = _order_axes(order)
    cy = np.hypot(m[..., i, i], m[..., j, i])
    regular = cy > 16.0 * np.finfo(np.float32).eps
    out = np.empty((*m.shape[:-2], 3))
    out[..., i] = np.where(
        regular,
        np.arctan2(m[..., k, j], m[..., k, k]),
        np.arctan2(-m[..., j, k], m[..., j, j]),  # gimbal lock: put everything on the first axis
    )
    out[..., j] = np.arctan2(-m[..., k, i], cy)
    out[..., k] = np.where(regular, np.arctan2(m[..., j, i], m[..., i, i]), 0.0)
    if odd:
        out = -out
    return out


def _shepperd_maps() -> tuple[FloatArray, FloatArray, FloatArray]:
    """The linear maps of ``quaternion_from_matrix``: the matrix's 9 entries (row-major) to
    its 4 candidate rows (16 values, plus a constant) and to 4 w^2 - 1, 4 x^2 - 1, 4 y^2 - 1,
    4 z^2 - 1 (the trace and 2 m_ii - trace)."""
    # each candidate row: (constant, [(sign, row, column), ...]) per component
    rows = [
        [
            (1.0, [(1, 0, 0), (1, 1, 1), (1, 2, 2)]),
            (0.0, [(1, 2, 1), (-1, 1, 2)]),
            (0.0, [(1, 0, 2), (-1, 2, 0)]),
            (0.0, [(1, 1, 0), (-1, 0, 1)]),
        ],
        [
            (0.0, [(1, 2, 1), (-1, 1, 2)]),
            (1.0, [(1, 0, 0), (-1, 1, 1), (-1, 2, 2)]),
            (0.0, [(1, 0, 1), (1, 1, 0)]),
            (0.0, [(1, 0, 2), (1, 2, 0)]),
        ],
        [
            (0.0, [(1, 0, 2), (-1, 2, 0)]),
            (0.0, [(1, 0, 1), (1, 1, 0)]),
            (1.0, [(-1, 0, 0), (1, 1, 1), (-1, 2, 2)]),
            (0.0, [(1, 1, 2), (1, 2, 1)]),
        ],
        [
            (0.0, [(1, 1, 0), (-1, 0, 1)]),
            (0.0, [(1, 0, 2), (1, 2, 0)]),
            (0.0, [(1, 1, 2), (1, 2, 1)]),
            (1.0, [(-1, 0, 0), (-1, 1, 1), (1, 2, 2)]),
        ],
    ]
    lin = np.zeros((9, 16))
    const = np.zeros(16)
    for r, row in enumerate(rows):
        for c, (k, terms) in enumerate(row):
            const[4 * r + c] = k
            for sign, i, j in terms:
                lin[3 * i + j, 4 * r + c] = sign
    diag = np.zeros((9, 4))
    diag[[0, 4, 8], 0] = 1.0
    for a in range(3):
        diag[[0, 4, 8], a + 1] = -1.0
        diag[4 * a, a + 1] = 1.0
    return lin, const, diag


_SHEPPERD = _shepperd_maps()


def quaternion_from_matrix(matrix: ArrayLike) -> FloatArray:
    """Unit quaternions (..., 4) (w, x, y, z), with w >= 0, of rotation matrices (..., 3, 3).

    Shepperd's method: take the square root of the largest of 4 w^2, 4 x^2, 4 y^2, 4 z^2
    (computed from the trace and the diagonal) for numerical stability: the row of
    (4 w^2, 4 wx, 4 wy, 4 wz)-like products of that component, normalised. The rows and the
    squares are linear in the matrix's entries (``_shepperd_maps``): two products, not forty
    numpy calls.
    """
    m = np.asarray(matrix, dtype=np.float64)
    flat = m.reshape(*m.shape[:-2], 9)
    lin, const, diag_map = _SHEPPERD
    candidates = (flat @ lin + const).reshape(-1, 4, 4)
    best = np.argmax(flat @ diag_map, axis=-1).reshape(-1)
    q = candidates[np.arange(len(best)), best].reshape(*m.shape[:-2], 4)
    q /= np.sqrt(np.add.reduce(q * q, axis=-1, keepdims=True))  # (``np.linalg.norm``'s sum)
    return np.where(q[..., :1] < 0.0, -q, q)


def matrix_from_quaternion(quaternion: ArrayLike) -> FloatArray:
    """Rotation matrices (..., 3, 3) of quaternions (..., 4) (w, x, y, z); normalises first."""
    q = np.asarray(quaternion, dtype=np.float64)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        axis=-2,
    )


def axis_angle_from_quaternion(quaternion: ArrayLike) -> FloatArray:
    """Axis-angle (..., 4) (angle, x, y, z) of quaternions; the angle is in [0, 2 pi].

    A zero rotation gets Blender's default axis (0, 1, 0). Feeding quaternions made continuous
    with :func:`make_quaternions_continuous` gives continuous angles.
    """
    q = np.asarray(quaternion, dtype=np.float64)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    vec = q[..., 1:]
    sin_half = np.linalg.norm(vec, axis=-1)
    angle = 2.0 * np.arctan2(sin_half, q[..., 0])
    safe = sin_half > 1e-12
    axis = np.where(
        safe[..., None], vec / np.where(safe, sin_half, 1.0)[..., None], np.array([0.0, 1.0, 0.0])
    )
    return np.concatenate([angle[..., None], axis], axis=-1)


def axis_angle_from_matrix(matrix: ArrayLike) -> FloatArray:
    """Axis-angle (..., 4) (angle, x, y, z) of rotation matrices, angle in [0, pi]."""
    return axis_angle_from_quaternion(quaternion_from_matrix(matrix))


def matrix_from_axis_angle(axis_angle: ArrayLike) -> FloatArray:
    """Rotation matrices (..., 3, 3) of axis-angle (..., 4) (angle, x, y, z) (Rodrigues)."""
    aa = np.asarray(axis_angle, dtype=np.float64)
    axis = aa[..., 1:]
    norm = np.linalg.norm(axis, axis=-1, keepdims=True)
    axis = np.where(norm > 0.0, axis / np.where(norm > 0.0, norm, 1.0), 0.0)
    half = 0.5 * aa[..., 0]
    q = np.concatenate([np.cos(half)[..., None], np.sin(half)[..., None] * axis], axis=-1)
    return matrix_from_quaternion(q)


def make_quaternions_continuous(
    quaternions: ArrayLike, previous: ArrayLike | None = None
) -> FloatArray:
    """Flip signs along axis 0 (frames) so consecutive quaternions lie in one hemisphere.

    q and -q are the same rotation; keyframing the one with a positive dot product with the
    previous frame keeps F-curves from jumping. ``previous`` (shape of one frame) is the value
    the first frame should stay close to (e.g. the current pose channel).
    """
    q = np.array(quaternions, dtype=np.float64)
    if q.shape[0] == 0:
        return q
    first = np.ones(q.shape[1:-1])
    if previous is not None:
        first = np.where(np.sum(q[0] * np.asarray(previous), axis=-1) < 0.0, -1.0, 1.0)
    if q.shape[0] == 1:  # one frame (a live update): the sign that ``previous`` asks for
        return q * first[None, ..., None]
    steps = np.where(np.sum(q[1:] * q[:-1], axis=-1) < 0.0, -1.0, 1.0)
    signs = np.cumprod(np.concatenate([first[None], steps], axis=0), axis=0)
    return q * signs[..., None]


def make_axis_angle_continuous(
    axis_angle: ArrayLike, previous: ArrayLike | None = None
) -> FloatArray:
    """Choose, frame by frame along axis 0, the axis-angle (..., 4) nearest the previous frame's.

    (angle, axis), (-angle, -axis) and both with the angle moved by multiples of 2 pi are the
    same rotation; near the identity the axis of ``axis_angle_from_quaternion`` flips while the
    angle bounces off 0, which the negated form avoids (at the identity itself the previous
    axis is kept). ``previous`` seeds the first frame.
    """
    aa = np.array(axis_angle, dtype=np.float64)
    negated = -aa
    out = np.empty_like(aa)
    prev = None if previous is None else np.asarray(previous, dtype=np.float64)
    for f in range(aa.shape[0]):
        if prev is None:
            out[f] = aa[f]
        else:
            a, b = aa[f].copy(), negated[f].copy()
            a[..., 0] = _wrap_near(a[..., 0], prev[..., 0])
            b[..., 0] = _wrap_near(b[..., 0], prev[..., 0])
            use_b = np.sum(np.abs(b - prev), axis=-1) < np.sum(np.abs(a - prev), axis=-1)
            best = np.where(use_b[..., None], b, a)
            identity = (np.abs(np.sin(0.5 * aa[f, ..., 0])) < 1e-12)[..., None]
            keep_axis = np.concatenate([best[..., :1], prev[..., 1:]], axis=-1)
            out[f] = np.where(identity, keep_axis, best)
        prev = out[f]
    return out


def _wrap_near(angles: FloatArray, reference: FloatArray) -> FloatArray:
    """Add multiples of 2 pi to each angle to bring it nearest to ``reference``."""
    return angles + _TAU * np.round((reference - angles) / _TAU)


def make_euler_continuous(
    angles: ArrayLike, order: str = "XYZ", previous: ArrayLike | None = None
) -> FloatArray:
    """Choose, frame by frame along axis 0, the equivalent Euler triple nearest the previous one.

    Every rotation has two Euler solutions, (a, b, c) and (a + pi, pi - b, c + pi) (a, b, c
    the angles about the first, middle and last axes of the order), each defined up to 2 pi per
    angle. For each frame both are wrapped next to the previous frame's angles and the one with
    the smaller total change is kept, so curves never jump by 2 pi. ``previous`` (shape of one
    frame) seeds the first frame.
    """
    e = np.array(angles, dtype=np.float64)
    i, j, k, _ = _order_axes(order)
    flipped = e.copy()
    flipped[..., i] += np.pi
    flipped[..., j] = np.pi - flipped[..., j]
    flipped[..., k] += np.pi
    out = np.empty_like(e)
    prev = None if previous is None else np.asarray(previous, dtype=np.float64)
    for f in range(e.shape[0]):
        if prev is None:
            out[f] = e[f]
        else:
            a = _wrap_near(e[f], prev)
            b = _wrap_near(flipped[f], prev)
            use_b = np.sum(np.abs(b - prev), axis=-1) < np.sum(np.abs(a - prev), axis=-1)
            out[f] = np.where(use_b[..., None], b, a)
        prev = out[f]
    return out
