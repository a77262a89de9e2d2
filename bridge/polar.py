"""The rotation nearest to a matrix (below ``rig`` and ``full_body``, which both use it)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]


def nearest_rotation(m: Array) -> Array:
    """The rotation nearest to each (..., 3, 3) matrix (polar decomposition): scale removed."""
    u, _, vt = np.linalg.svd(m)
    r = u @ vt
    flip = np.linalg.det(r) < 0.0
    if np.any(flip):
        u = u.copy()
        u[flip, :, -1] *= -1.0
        r = u @ vt
    return r
