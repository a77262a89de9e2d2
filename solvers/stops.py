"""Why a frame stopped, and the constants of the stop tests, shared by the three loops:
solve.py's ``_iterate`` (numpy, every frame at once), kernel.py's compiled loop and frame.py's
one-frame path. Defined once here so that they cannot drift apart (the kernel writes these codes
into its output array, ``REASONS`` names them)."""

from __future__ import annotations

import numpy as np

# a frame's stop reason, an index into REASONS
RUNNING, CONVERGED, STAGNATED, DIVERGED, MAX_ITERATIONS, FAILED, STATIONARY = range(7)
REASONS = np.array(
    ["", "converged", "stagnated", "diverged", "max_iterations", "failed", "stationary"]
)

KICK = 0.05
"""Radians: how far each free DOF turns to leave a saddle point (a straight chain)."""
MIN_STEP_SCALE = 1.0 / 1024
"""A frame whose step, halved after each rise of the error, gets shorter than this is at a
stationary point for its method."""
BOUND_SLACK = 0.1
"""A goal out of reach is done when its error is within this fraction of the tolerance of its
lower bound (``solve._Problem.lower_bound``): as close as a straight chain gets, to 1e-6 at the
default tolerance."""

SETTLED = 0.01
"""A frame whose unmet goals are all out of reach stops at a stationary point when its last two
steps lowered the residual by less than this fraction of the tolerance together: where goals of
one tree pull apart beyond reach, no goal can reach its own lower bound (the bound test), and
the steps creep on by 1e-8 a step for hundreds of iterations (zoo humanoids with both hands
through the spine)."""

RAISES = 12
"""How many times the Newton step's damping may be raised tenfold (1e-3 to 1e9) before the
frame takes its method's step instead."""
