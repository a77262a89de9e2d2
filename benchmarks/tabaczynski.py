"""Tabaczynski (2006), section 4.4: planar 2- and 5-link chains, targets reachable, too far and
too close; iterations until the error is within 0.01 and 1e-7 (of the target for reachable
targets, of the best possible distance, the "target line", for unreachable ones).

The paper does not give its chains, start poses or targets; we choose them (CASES, START) and
say so in the report. Its constants: truncated pseudoinverse threshold 1e-4, DLS lambda 1.1 and
d_max 0.7, every step scaled so that no joint turns more than pi/4. Its MATLAB DLS adds lambda,
not lambda^2, to sigma^2 (section 3.5), so its lambda 1.1 is our damping sqrt(1.1).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from jacobian_ik.solvers import Goals, Pose, Settings, exp_so3, solve
from tests.rigs.skeletons import planar_chain

CHAINS = {"2 links": (1.0, 0.6), "5 links": (1.2, 0.2, 0.2, 0.2, 0.2)}
START = 0.3  # every joint starts at 0.3 rad (the straight chain is singular)
CASES = {
    "reachable": (-0.6, 1.1),
    "too far": (2.4, 1.4),
    "too close": (0.15, -0.1),
}
MAX_STEP = math.pi / 4
METHODS = {
    "truncated pseudoinverse": Settings(
        method="pseudoinverse", params={"threshold": 1e-4}, max_step=MAX_STEP
    ),
    "transpose": Settings(method="transpose", max_step=MAX_STEP),
    "DLS": Settings(
        method="dls",
        params={"damping": math.sqrt(1.1)},
        clamp_distance=0.7,
        max_step=MAX_STEP,
        second_order=False,  # the paper's DLS
    ),
}
PAPER = {
    ("2 links", "reachable"): {
        "truncated pseudoinverse": (14, 16),
        "transpose": (120, 570),
        "DLS": (50, 141),
    },
    ("5 links", "reachable"): {
        "truncated pseudoinverse": (6, 7),
        "transpose": (140, 459),
        "DLS": (16, 40),
    },
    ("2 links", "too far"): {"truncated pseudoinverse": "never", "transpose": 100, "DLS": 45},
    ("2 links", "too close"): {"truncated pseudoinverse": "never", "transpose": 68, "DLS": 30},
}


def start_pose(n: int) -> Pose:
    pose = Pose.rest(n)
    v = np.zeros((1, n, 3))
    v[0, :, 2] = START
    pose.rotations = exp_so3(v)
    return pose


def optimum(lengths: tuple[float, ...], target: tuple[float, float]) -> float:
    """The smallest reachable distance to ``target`` (0 inside the annulus)."""
    r = math.hypot(*target)
    reach = sum(lengths)
    inner = max(0.0, max(lengths) - (reach - max(lengths)))
    return max(0.0, r - reach, inner - r)


def run(iterations: int = 1000) -> dict[str, Any]:
    """Per chain, case and method: the error history (iterations+1,), the tip path and the
    iterations to 0.01 and 1e-7 of the optimum (None = never within ``iterations``)."""
    out: dict[str, Any] = {}
    for chain, lengths in CHAINS.items():
        skel = planar_chain(lengths)
        for case, target in CASES.items():
            goal = np.tile([target[0], target[1], 0.0], (iterations, 1, 1))
            best = optimum(lengths, target)
            for name, settings in METHODS.items():
                # track mode over identical frames: one step per frame, the error after each;
                # tolerance 0, or a frame within the tolerance would take no step
                st = Settings(
                    **{**settings.__dict__, "mode": "track", "track_steps": 1, "tolerance": 0.0}
                )
                start = start_pose(len(lengths))
                res = solve(skel, Goals(goal), st, pose=start)
                first = float(
                    np.linalg.norm(goal[0, 0] - skel.forward_kinematics(start).points[0, 0])
                )
                err = np.concatenate([[first], res.position_error[:, 0]])
                tips = skel.forward_kinematics(res.pose).points[:, 0, :2]
                reached = {}
                for level in (0.01, 1e-7):
                    hit = np.flatnonzero(err - best <= level)
                    reached[level] = int(hit[0]) if len(hit) else None
                out[(chain, case, name)] = {
                    "error": err,
                    "tips": tips,
                    "optimum": best,
                    "iterations": reached,
                }
    return out
