"""Cost of one iteration of every method: the double-Y (4 position goals, 25 DOF) and the
20-bone humanoid (hands with orientation, feet; 3-bone ball-joint chains), one frame and a batch
of 250 frames (per frame). ``solve`` in converge mode with every stop disabled runs exactly
``iterations`` steps; the median over ``repeats`` of elapsed / iterations is reported."""

from __future__ import annotations

from typing import Any

import numpy as np

from jacobian_ik.solvers import METHODS, Goals, Pose, Settings, solve
from tests.rigs.skeletons import buss_kim, buss_kim_targets, humanoid

from .common import median_time

PARAMS: dict[str, dict[str, Any]] = {"dls": {"damping": 1.1}}


def problems(frames: int) -> dict[str, tuple[Any, Goals]]:
    dy = buss_kim("double_y_shape")
    t = 0.37 + np.arange(frames) * 0.05
    out = {"double-Y": (dy, Goals(buss_kim_targets("double_y_shape", t)))}
    skel, _ = humanoid()
    rng = np.random.default_rng(1)
    base = skel.forward_kinematics(Pose.rest(skel.n_bones)).points[0]
    pos = base[None] + rng.normal(scale=0.1, size=(frames, 4, 3))
    rot = np.broadcast_to(np.eye(3), (frames, 4, 3, 3)).copy()
    out["humanoid"] = (skel, Goals(pos, rot, rotation_weight=[1, 1, 0, 0]))
    return out


def run(iterations: int = 20, repeats: int = 5, batch: int = 250) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for frames in (1, batch):
        for prob, (skel, goals) in problems(frames).items():
            for method in METHODS:
                st = Settings(
                    method=method,
                    params=PARAMS.get(method, {}),
                    tolerance=0.0,
                    rotation_tolerance=0.0,
                    stagnation=0.0,
                    divergence_count=iterations + 1,
                    max_iterations=iterations,
                )
                sec = median_time(lambda s=skel, g=goals, st=st: solve(s, g, st), repeats)
                rows[(prob, frames, method)] = sec / iterations / frames * 1e6
    return rows
