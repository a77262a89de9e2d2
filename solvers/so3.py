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


def exp_so3(v: Array) -> Array:
    """Rotation matrices exp([v]x) (Rodrigues), exact and smooth at v = 0."""
    theta2 = np.einsum("...i,...i->...", v, v)
    theta = np.sqrt(theta2)
    small = theta2 < 1e-12
    safe = np.where(small, 1.0, theta)
    # sin(t)/t and (1 - cos t)/t^2, with their Taylor series near 0
    a = np.where(small, 1.0 - theta2 / 6.0, np.sin(safe) / safe)
    b = np.where(small, 0.5 - theta2 / 24.0, (1.0 - np.cos(safe)) / (safe * safe))
    k = hat(v)
    out = a[..., None, None] * k + b[..., None, None] * (k @ k)
    out[..., 0, 0] += 1.0
    out[..., 1, 1] += 1.0
    out[..., 2, 2] += 1.0
    return out


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


def orthonormalize(m: Array) -> Array:
    """The nearest rotation (or reflection, when det < 0) to each 3x3 matrix, by polar SVD."""
    u, _, vt = np.linalg.svd(m)
    return u @ vt
