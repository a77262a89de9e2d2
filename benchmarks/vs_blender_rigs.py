"""The three rigs of ``benchmarks.vs_blender`` (docs/benchmarks.md#against-blenders-ik):
A, Buss-Kim's double-Y tree; B, the demo's 20-bone humanoid; C, a 30-bone chain."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tests.rigs.scenes import Bone, RigSpec


def double_y_bones() -> list[Bone]:
    """16 bones between the distinct joint positions of Buss-Kim's double-Y shape."""
    c, s = 0.35355339059327373, -0.14644660940672627
    bones: list[Bone] = [
        ("trunk.0", (0.0, -1.5, 0.0), (0.0, -1.0, 0.0), None, False),
        ("trunk.1", (0.0, -1.0, 0.0), (0.0, -0.5, 0.0), "trunk.0", True),
        ("arm.R", (0.0, -0.5, 0.0), (c, s, 0.0), "trunk.1", True),
        ("arm.L", (0.0, -0.5, 0.0), (-c, s, 0.0), "trunk.1", True),
    ]
    fingers = {
        "f1": (
            "arm.R",
            [
                (c, s),
                (0.786566092485493, 0.10355339059327373),
                (1.2195787943777123, 0.35355339059327373),
                (1.6525914962699317, 0.6035533905932737),
            ],
        ),
        "f2": (
            "arm.R",
            [
                (c, s),
                (0.786566092485493, 0.2865660924854931),
                (1.2195787943777123, 0.7195787943777124),
                (1.6525914962699317, 1.1525914962699318),
            ],
        ),
        "f3": (
            "arm.L",
            [
                (-c, s),
                (-0.786566092485493, 0.2865660924854931),
                (-1.2195787943777123, 0.7195787943777124),
                (-1.6525914962699317, 1.1525914962699318),
            ],
        ),
        "f4": (
            "arm.L",
            [
                (-c, s),
                (-0.786566092485493, 0.10355339059327373),
                (-1.2195787943777123, 0.35355339059327373),
                (-1.6525914962699317, 0.6035533905932737),
            ],
        ),
    }
    for name, (parent, points) in fingers.items():
        for i in range(3):
            (x0, y0), (x1, y1) = points[i], points[i + 1]
            bones.append(
                (
                    f"{name}.{i}",
                    (x0, y0, 0.0),
                    (x1, y1, 0.0),
                    parent if i == 0 else f"{name}.{i - 1}",
                    True,
                )
            )
    return bones


def double_y_targets(frames: int) -> np.ndarray:
    """Buss-Kim's demo targets for the double-Y (buss-kim-shapes.json), T = 0.02 (frame - 1)."""
    t = 0.02 * np.arange(frames)
    sin = np.sin
    out = np.stack(
        [
            [2.0 + 3.0 * sin(3 * t), 0.5 + 0.4 * sin(7 * t), 0.3 + 1.4 * sin(5 * t)],
            [0.5 + 0.8 * sin(4 * t), 0.4 + 0.6 * sin(4 * t), -0.2 + 2.0 * sin(3 * t)],
            [-0.5 + 1.6 * sin(6 * t), 0.6 + 0.4 * sin(7 * t), 0.3 + 1.0 * sin(8 * t)],
            [-1.6 + 1.6 * sin(4 * t), 0.3 + 0.6 * sin(4 * t), -0.2 + 0.6 * sin(3 * t)],
        ]
    )  # (E, 3, F)
    return np.moveaxis(out, -1, 0)


def humanoid_bones() -> list[Bone]:
    """scripts/demo.py's 20-bone character (Z up, facing -Y)."""
    from scripts.demo import BONES

    return list(BONES)


HUMANOID_GOALS = ["hand.L", "hand.R", "foot.L", "foot.R"]


def humanoid_targets(frames: int) -> np.ndarray:
    """Hands circle in front of the chest and reach out sideways (past the arm's 0.62) around
    frames 63 and 188; feet step in place."""
    f = np.arange(frames, dtype=float)
    phase = 2 * np.pi * f / 50
    reach = np.sin(np.pi * f / 125) ** 8  # 0 .. 1, peaks at f = 62.5 + 125 k
    out = np.zeros((frames, 4, 3))
    for k, s in enumerate((1.0, -1.0)):
        circle = np.stack(
            [
                0.35 * s + 0.1 * s * np.cos(phase),
                np.full(frames, -0.25),
                1.15 + 0.1 * np.sin(phase + k),
            ],
            axis=1,
        )
        out_there = np.array([1.0 * s, -0.05, 1.45])
        out[:, k] = circle + reach[:, None] * (out_there - circle)
    for k, s in enumerate((1.0, -1.0)):
        step = phase + k * np.pi
        out[:, 2 + k] = np.stack(
            [
                np.full(frames, 0.1 * s),
                -0.16 - 0.15 * np.sin(step),
                0.02 + np.maximum(0.0, 0.1 * np.cos(step)),
            ],
            axis=1,
        )
    return out


def animate_hips(ob: Any, frames: int) -> None:
    hips = ob.pose.bones["hips"]
    for frame in range(1, frames + 1, 5):
        phase = 2 * math.pi * (frame - 1) / 50
        # pose location is in the bone's frame: Y is along the bone (up)
        hips.location = (0.03 * math.sin(phase), -0.05 + 0.04 * math.cos(2 * phase), 0.0)
        hips.keyframe_insert("location", frame=frame)


def chain30_bones() -> list[Bone]:
    return [
        (
            f"b{i:02d}",
            (0.0, 0.0, 0.1 * i),
            (0.0, 0.0, 0.1 * (i + 1)),
            f"b{i - 1:02d}" if i else None,
            True,
        )
        for i in range(30)
    ]


def chain30_targets(frames: int) -> np.ndarray:
    t = 2 * np.pi * np.arange(frames) / 250
    p = np.stack([1.6 * np.sin(2 * t), 1.2 * np.sin(3 * t + 0.5), 1.7 + 1.3 * np.sin(t)], axis=1)
    return p[:, None, :]


RIGS = {
    "A": RigSpec(
        "A",
        "A: double-Y tree, 16 bones, 4 goals",
        double_y_bones(),
        [(f"f{k}.2", 0) for k in range(1, 5)],
        double_y_targets,
        description="Buss-Kim double-Y: 2-bone trunk, 2 arms, 4 three-bone fingers; IK on "
        "the 4 fingertips, chain length 0 (shared trunk); Buss-Kim's target formulas, "
        "T = 0.02 (frame - 1)",
    ),
    "B": RigSpec(
        "B",
        "B: humanoid, 20 bones, hands + feet",
        humanoid_bones(),
        [(name, 3) for name in HUMANOID_GOALS],
        humanoid_targets,
        animate_hips,
        description="scripts/demo.py's character; IK on hands and feet, chain length 3; hips "
        "keyed; hands circle and reach out past arm's length twice; feet step",
    ),
    "C": RigSpec(
        "C",
        "C: 30-bone chain, 1 goal",
        chain30_bones(),
        [("b29", 0)],
        chain30_targets,
        description="30 bones of 0.1 along +Z, IK on the last one, chain length 0; target on "
        "a Lissajous curve 1.0 to 3.3 from the root (reach 3.0)",
    ),
}
