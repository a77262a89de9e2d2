"""Rotations as numpy arrays: the exponential map and Sugihara's angle-axis vector.

Every function works on stacks: the last axes are the vector (3,) or matrix (3, 3), all leading
axes are batch axes.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]


def hat(v: Array) -> Array:
    """Skew-symmetric matrices [v]x with hat(v) @ w == cross(v, w)."""
    out = np.zeros((*v.shape[:-1], 3, 3))
    out[..., 0, 1] = -v[..., 2]
    out[..., 0, 2] = v[..., 1]
    out[..., 1, 0] = v[..., 2]
    out[..., 1, 2] = -v[..., 0]
    out[..., 2, 0] = -v[..., 1]
    out[..., 2, 1] = v[..., 0]
    return out


# hat(v).reshape(9) == v @ _HAT
_HAT = np.zeros((3, 9))
_HAT[2, 1], _HAT[1, 2], _HAT[2, 3], _HAT[0, 5], _HAT[1, 6], _HAT[0, 7] = -1, 1, 1, -1, -1, 1
_EYE9 = np.eye(3).reshape(9)


def exp_so3(v: Array) -> Array:
    """Rotation matrices exp([v]x) (Rodrigues), exact and smooth at v = 0.

    R = cos t I + (sin t / t) [v]x + ((1 - cos t) / t^2) v v^T, with t = |v| and Taylor series
    of both coefficients near 0.
    """
    theta2 = np.einsum("...i,...i->...", v, v)
    small = theta2 < 1e-12
    theta = np.sqrt(np.where(small, 1.0, theta2))
    a = np.where(small, 1.0 - theta2 / 6.0, np.sin(theta) / theta)
    b = np.where(small, 0.5 - theta2 / 24.0, (1.0 - np.cos(theta)) / (theta * theta))
    c = np.where(small, 1.0 - theta2 / 2.0, np.cos(theta))
    outer = (v[..., :, None] * v[..., None, :]).reshape(*v.shape[:-1], 9)
    flat = c[..., None] * _EYE9 + a[..., None] * (v @ _HAT) + b[..., None] * outer
    return flat.reshape(*v.shape[:-1], 3, 3)


def angle_axis(r: Array) -> Array:
    """The equivalent angle-axis vector a(R) of Sugihara (2011), Appendix A (eqs. 21-23).

    Below 90 degrees this is eq. (22), a = atan2(|l|, tr R - 1) l / |l|. Above 90 degrees the
    axis is read from the symmetric part (R + R^T)/2 = cos t I + (1 - cos t) n n^T instead,
    with its sign taken from l: this is exact at 180 degrees (where l vanishes and eq. 22 would
    lose all precision), and reduces to eq. (23) for the diagonal cases.
    """
    l_vec = np.stack(
        [
            r[..., 2, 1] - r[..., 1, 2],
            r[..., 0, 2] - r[..., 2, 0],
            r[..., 1, 0] - r[..., 0, 1],
        ],
        axis=-1,
    )
    trace = r[..., 0, 0] + r[..., 1, 1] + r[..., 2, 2]
    l_norm = np.sqrt(np.einsum("...i,...i->...", l_vec, l_vec))
    angle = np.arctan2(l_norm, trace - 1.0)
    small = l_norm < 1e-300
    scale = np.where(small, 0.0, angle / np.where(small, 1.0, l_norm))
    out = scale[..., None] * l_vec
    wide = trace < 1.0  # angle above 90 degrees
    if np.any(wide):
        rw = r[wide]
        cos_t = (trace[wide] - 1.0) / 2.0
        sym = 0.5 * (rw + np.swapaxes(rw, -1, -2))
        nn = (sym - cos_t[:, None, None] * np.eye(3)) / (1.0 - cos_t)[:, None, None]
        diag = np.einsum("kii->ki", nn)
        col = np.argmax(diag, axis=-1)
        axis = nn[np.arange(len(col)), :, col]
        axis /= np.linalg.norm(axis, axis=-1, keepdims=True)
        sign = np.where(np.einsum("ki,ki->k", axis, l_vec[wide]) < 0.0, -1.0, 1.0)
        out[wide] = (sign * angle[wide])[:, None] * axis
    return out


def mul(a: Array, b: Array) -> Array:
    """a @ b for stacks of 3x3 (or 3xk) matrices, written out.

    numpy's stacked matmul picks BLAS or its own loop by the strides and batch size, which
    rounds differently; writing the three products out keeps every frame's arithmetic the
    same whether it is solved alone or in a batch (and is faster for 3x3 stacks).
    """
    return np.asarray(
        a[..., :, 0, None] * b[..., None, 0, :]
        + a[..., :, 1, None] * b[..., None, 1, :]
        + a[..., :, 2, None] * b[..., None, 2, :]
    )


def rotate(a: Array, v: Array) -> Array:
    """a @ v for stacks of 3x3 matrices and 3-vectors, written out (see ``mul``)."""
    return np.asarray(
        a[..., :, 0] * v[..., None, 0]
        + a[..., :, 1] * v[..., None, 1]
        + a[..., :, 2] * v[..., None, 2]
    )


def det3(m: Array) -> Array:
    """Determinants of stacks of 3x3 matrices, written out (no LAPACK call: on a busy machine
    OpenBLAS's thread pool can make one batched call wait a millisecond)."""
    return np.asarray(
        m[..., 0, 0] * (m[..., 1, 1] * m[..., 2, 2] - m[..., 1, 2] * m[..., 2, 1])
        - m[..., 0, 1] * (m[..., 1, 0] * m[..., 2, 2] - m[..., 1, 2] * m[..., 2, 0])
        + m[..., 0, 2] * (m[..., 1, 0] * m[..., 2, 1] - m[..., 1, 1] * m[..., 2, 0])
    )


_NEXT, _LAST = np.array([1, 2, 0]), np.array([2, 0, 1])


def det3_quick(m: Array) -> Array:
    """``det3`` to rounding (not bit for bit: numpy's einsum may add the three products in
    another order), in five numpy calls rather than seventeen: the first row dotted with the
    cross product of the others. For a determinant's sign or size (8 against 11 us on a live
    update's 21 matrices); ``det3`` where the value is computed with (``inv3``)."""
    cross = m[..., 1, _NEXT] * m[..., 2, _LAST] - m[..., 1, _LAST] * m[..., 2, _NEXT]
    return np.asarray(np.einsum("...i,...i->...", m[..., 0, :], cross))


_J, _I = np.meshgrid(np.arange(3), np.arange(3))  # entry (i, j) of the adjugate:
_R0, _R1, _C0, _C1 = (_J + 1) % 3, (_J + 2) % 3, (_I + 1) % 3, (_I + 2) % 3  # its minor's


def inv3(m: Array) -> Array:
    """Inverses of stacks of invertible 3x3 matrices by the adjugate (see ``det3``): its nine
    entries m[r0, c0] m[r1, c1] - m[r0, c1] m[r1, c0] in four gathers instead of nine numpy
    calls each (live posing inverts a few matrices an update: 40 -> 21 us for six; on 10,000
    at once 1.2 -> 1.3 ms)."""
    adj = m[..., _R0, _C0] * m[..., _R1, _C1] - m[..., _R0, _C1] * m[..., _R1, _C0]
    return np.asarray(adj / det3(m)[..., None, None])


def unmirror(m: Array) -> Array:
    """(..., 3, 3) matrices with the X column turned around where the determinant is negative:
    a reflection (a mirrored armature or target) becomes a proper matrix with the same Y and Z
    axes, so a bone follows a mirrored target's Y (along it) and Z and mirrors its X."""
    flip = np.where(det3(m) < 0.0, -1.0, 1.0)
    out = np.array(m, dtype=np.float64)
    out[..., :, 0] *= flip[..., None]
    return out


def orthonormalize(m: Array) -> Array:
    """The nearest rotation (or reflection, when det < 0) to each 3x3 matrix, by polar SVD."""
    u, _, vt = np.linalg.svd(m)
    return u @ vt
