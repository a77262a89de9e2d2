"""Deo and Walker (1995), section 5: the 3-link planar arm (links 1, 0.5, 0.5) starting at the
nearly singular [5, -175, 175] degrees follows a 0.9 x 0.7 rectangle counter-clockwise from its
lower-left corner, one damped step per time step (``solve(mode="track")``): the pseudoinverse
against optimal damping with the joint-speed bound Delta = 5 (``dls_optimal`` with
``max_norm = Delta * dt``), and the obstacle variant with the null-space reference
configuration [-30, 0, 0] degrees (``nullspace="damped"``, Deo-Walker eq. 24).

Choices (the paper gives no timing): the rectangle takes 8 s (2 s a side), dt = 0.01 s; the
first corner is the start position of the effector; the rectangle extends 0.9 along +x and 0.7
along +y from it. The upper-right corner (1.90, 0.74) is 2.04 from the base, just outside the
reach of 2: both methods must leave the path there, and the pseudoinverse meets the singularity.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from jacobian_ik.solvers import Goals, Pose, Settings, exp_so3, solve
from tests.rigs.skeletons import planar_chain

LENGTHS = (1.0, 0.5, 0.5)
START_DEG = (5.0, -175.0, 175.0)
REFERENCE_DEG = (-30.0, 0.0, 0.0)
DELTA = 5.0
DT = 0.01
SIDE_SECONDS = 2.0
WIDTH, HEIGHT = 0.9, 0.7


def pose_of(degrees: tuple[float, ...]) -> Pose:
    pose = Pose.rest(len(degrees))
    v = np.zeros((1, len(degrees), 3))
    v[0, :, 2] = np.radians(degrees)
    pose.rotations = exp_so3(v)
    return pose


def rectangle(start: np.ndarray) -> np.ndarray:
    """(F, 3) the path: right, up, left, down from ``start``, constant speed on each side."""
    steps = round(SIDE_SECONDS / DT)
    corners = start + np.array([[0, 0, 0], [WIDTH, 0, 0], [WIDTH, HEIGHT, 0], [0, HEIGHT, 0]])
    path = []
    for i in range(4):
        a, b = corners[i], corners[(i + 1) % 4]
        s = (np.arange(1, steps + 1) / steps)[:, None]
        path.append(a + s * (b - a))
    return np.concatenate(path)


def run(obstacle_weight: float = 0.5) -> dict[str, Any]:
    """Joint-velocity norms (rad/s), Newton iterations and tracking deviations per variant."""
    skel = planar_chain(LENGTHS)
    start = pose_of(START_DEG)
    p0 = skel.forward_kinematics(start).points[0, 0]
    path = rectangle(p0)
    goals = Goals(path[:, None])
    variants = {
        "pseudoinverse": Settings(method="gauss_newton"),
        "optimal damping": Settings(method="dls_optimal", params={"max_norm": DELTA * DT}),
        "optimal damping + reference [-30, 0, 0]": Settings(
            method="dls_optimal",
            params={"max_norm": DELTA * DT},
            nullspace="damped",
            rest_weight=obstacle_weight * DT,
            rest_pose=pose_of(REFERENCE_DEG),
        ),
    }
    out: dict[str, Any] = {"path": path, "start": p0}
    for name, st in variants.items():
        st.mode, st.track_steps = "track", 1
        res = solve(skel, goals, st, pose=start)
        q = np.concatenate([skel.coordinates(start), skel.coordinates(res.pose)])
        dq = np.diff(np.unwrap(q, axis=0), axis=0)
        newton = res.stats.get("newton_iterations", [])
        damped = [x for x in newton if x > 0]
        out[name] = {
            "speed": np.linalg.norm(dq, axis=1) / DT,
            "deviation": res.position_error[:, 0],
            "newton_mean_all": float(np.mean(newton)) if newton else 0.0,
            "newton_mean_damped": float(np.mean(damped)) if damped else 0.0,
            "damped_steps": len(damped),
            "tips": skel.forward_kinematics(res.pose).points[:, 0, :2],
            "q": q,
        }
    return out


def reach_of_corner() -> float:
    p0 = planar_chain(LENGTHS).forward_kinematics(pose_of(START_DEG)).points[0, 0]
    return math.hypot(p0[0] + WIDTH, p0[1] + HEIGHT)
