"""The rotation nearest to a matrix (below ``rig`` and ``full_body``, which both use it)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]


def nearest_rotation(m: Array) -> Array:
    """The rotation nearest to each (..., 3, 3) matrix (polar decomposition): scale removed.

    A rotation times a positive uniform scale (what bones and targets nearly always hold) is
    divided by its scale; only the others go through the SVD (batched LAPACK calls are slow on
    many small matrices)."""
    m = np.asarray(m, dtype=np.float64)
    gram = np.swapaxes(m, -1, -2) @ m
    s2 = np.trace(gram, axis1=-2, axis2=-1) / 3.0
    dev = np.abs(gram - s2[..., None, None] * np.eye(3)).max(axis=(-2, -1))
    det = (
        m[..., 0, 0] * (m[..., 1, 1] * m[..., 2, 2] - m[..., 1, 2] * m[..., 2, 1])
        - m[..., 0, 1] * (m[..., 1, 0] * m[..., 2, 2] - m[..., 1, 2] * m[..., 2, 0])
        + m[..., 0, 2] * (m[..., 1, 0] * m[..., 2, 1] - m[..., 1, 1] * m[..., 2, 0])
    )
    easy = (s2 > 0.0) & (dev <= 1e-12 * s2) & (det > 0.0)
    if np.all(easy):
        return np.asarray(m / np.sqrt(s2)[..., None, None])
    out = np.empty_like(m)
    out[easy] = m[easy] / np.sqrt(s2[easy])[:, None, None]
    out[~easy] = _polar(m[~easy])
    return out


def _polar(m: Array) -> Array:
    u, _, vt = np.linalg.svd(m)
    r = u @ vt
    flip = np.linalg.det(r) < 0.0
    if np.any(flip):
        u = u.copy()
        u[flip, :, -1] *= -1.0
        r = u @ vt
    return r
