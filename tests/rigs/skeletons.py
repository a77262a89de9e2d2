"""Test and benchmark skeletons built with the public solver API (no Blender).

- ``chain``: a straight chain of bones along Y.
- ``humanoid``: a 20-bone humanoid (Blender-like bone frames, Y along each bone).
- ``buss_kim``: the Y and double-Y shapes of Buss and Kim (2005) from
  ``shared/reference/buss-kim-shapes.json``: every node a bone with one hinge about the node's
  world axis (the node's rest frame has its X axis on that axis).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from jacobian_ik.solvers import Effector, Joint, Skeleton

SHARED = Path(__file__).resolve().parents[3] / "shared"
SHAPES = SHARED / "reference" / "buss-kim-shapes.json"


def translation(x: float, y: float, z: float) -> np.ndarray:
    m = np.eye(4)
    m[:3, 3] = (x, y, z)
    return m


def chain(n: int, length: float = 1.0, joint: Joint | None = None) -> Skeleton:
    """n bones along +Y from the origin, each ``length`` long; one effector at the last tail."""
    rest = np.stack([np.eye(4) if b == 0 else translation(0, length, 0) for b in range(n)])
    joints = [joint or Joint.ball() for _ in range(n)]
    return Skeleton(list(range(-1, n - 1)), rest, joints, [Effector(n - 1, (0, length, 0), "tip")])


def _frame_looking(direction: np.ndarray) -> np.ndarray:
    """A rotation whose Y axis is ``direction`` (Blender's bone convention)."""
    y = direction / np.linalg.norm(direction)
    helper = np.array([0.0, 0.0, 1.0]) if abs(y[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
    x = np.cross(y, helper)
    x /= np.linalg.norm(x)
    z = np.cross(x, y)
    return np.stack([x, y, z], axis=1)


# name, parent, head, tail (metres, Z up, character facing -Y)
HUMANOID = [
    ("hips", None, (0, 0, 1.0), (0, 0, 1.1)),
    ("spine", "hips", (0, 0, 1.1), (0, 0, 1.3)),
    ("chest", "spine", (0, 0, 1.3), (0, 0, 1.5)),
    ("neck", "chest", (0, 0, 1.5), (0, 0, 1.6)),
    ("head", "neck", (0, 0, 1.6), (0, 0, 1.8)),
    ("shoulder.L", "chest", (0.05, 0, 1.45), (0.18, 0, 1.45)),
    ("upper_arm.L", "shoulder.L", (0.18, 0, 1.45), (0.46, 0, 1.45)),
    ("forearm.L", "upper_arm.L", (0.46, 0, 1.45), (0.72, -0.02, 1.45)),
    ("hand.L", "forearm.L", (0.72, -0.02, 1.45), (0.8, -0.02, 1.45)),
    ("shoulder.R", "chest", (-0.05, 0, 1.45), (-0.18, 0, 1.45)),
    ("upper_arm.R", "shoulder.R", (-0.18, 0, 1.45), (-0.46, 0, 1.45)),
    ("forearm.R", "upper_arm.R", (-0.46, 0, 1.45), (-0.72, -0.02, 1.45)),
    ("hand.R", "forearm.R", (-0.72, -0.02, 1.45), (-0.8, -0.02, 1.45)),
    ("thigh.L", "hips", (0.1, 0, 1.0), (0.1, -0.02, 0.55)),
    ("shin.L", "thigh.L", (0.1, -0.02, 0.55), (0.1, 0.02, 0.1)),
    ("foot.L", "shin.L", (0.1, 0.02, 0.1), (0.1, -0.12, 0.02)),
    ("thigh.R", "hips", (-0.1, 0, 1.0), (-0.1, -0.02, 0.55)),
    ("shin.R", "thigh.R", (-0.1, -0.02, 0.55), (-0.1, 0.02, 0.1)),
    ("foot.R", "shin.R", (-0.1, 0.02, 0.1), (-0.1, -0.12, 0.02)),
    ("toe.R", "foot.R", (-0.1, -0.12, 0.02), (-0.1, -0.18, 0.02)),
]

HUMANOID_GOALS = {"hand.L": True, "hand.R": True, "foot.L": False, "foot.R": False}


def humanoid(chain_length: int = 3, hinge_knees: bool = False) -> tuple[Skeleton, list[str]]:
    """The 20-bone humanoid with effectors at the tails of hands and feet; chains of
    ``chain_length`` bones above each effector are free (ball joints), the rest fixed."""
    names = [b[0] for b in HUMANOID]
    index = {n: i for i, n in enumerate(names)}
    world = []
    for _, _, head, tail in HUMANOID:
        m = np.eye(4)
        m[:3, :3] = _frame_looking(np.subtract(tail, head))
        m[:3, 3] = head
        world.append(m)
    parents = [index[p] if p else -1 for _, p, _, _ in HUMANOID]
    rest = np.stack(
        [
            world[b] if parents[b] < 0 else np.linalg.inv(world[parents[b]]) @ world[b]
            for b in range(len(names))
        ]
    )
    free: set[int] = set()
    effectors = []
    for name in HUMANOID_GOALS:
        b = index[name]
        length = float(np.linalg.norm(np.subtract(HUMANOID[b][3], HUMANOID[b][2])))
        effectors.append(Effector(b, (0, length, 0), name))
        for _ in range(chain_length):
            free.add(b)
            b = parents[b]
    joints = []
    for b, name in enumerate(names):
        if b not in free:
            joints.append(Joint.fixed())
        elif hinge_knees and name.startswith(("shin", "forearm")):
            joints.append(Joint.hinge("X"))
        else:
            joints.append(Joint.ball())
    return Skeleton(parents, rest, joints, effectors, names), names


def load_shapes() -> dict[str, Any]:
    return dict(json.loads(SHAPES.read_text()))


def buss_kim(shape: str = "double_y_shape") -> Skeleton:
    """The Buss-Kim shape as a skeleton of hinge bones; effectors in the shape's effector order."""
    data = load_shapes()[shape]
    nodes = {n["id"]: n for n in data["nodes"]}
    joints_ids = [n["id"] for n in data["nodes"] if n["kind"] == "revolute"]
    index = {nid: i for i, nid in enumerate(joints_ids)}
    world = []
    for nid in joints_ids:
        node = nodes[nid]
        axis = np.asarray(node["axis"], dtype=float)
        m = np.eye(4)
        x = axis / np.linalg.norm(axis)
        helper = np.array([0.0, 1.0, 0.0]) if abs(x[1]) < 0.9 else np.array([1.0, 0.0, 0.0])
        z = np.cross(x, helper)
        z /= np.linalg.norm(z)
        m[:3, :3] = np.stack([x, np.cross(z, x), z], axis=1)
        m[:3, 3] = node["position"]
        world.append(m)
    parents = [
        index[nodes[nid]["parent"]] if nodes[nid]["parent"] >= 0 else -1 for nid in joints_ids
    ]
    rest = np.stack(
        [
            world[b] if parents[b] < 0 else np.linalg.inv(world[parents[b]]) @ world[b]
            for b in range(len(world))
        ]
    )
    order = data.get("effector_order") or [
        n["id"] for n in data["nodes"] if n["kind"] == "effector"
    ]
    effectors = []
    for nid in order:
        node = nodes[nid]
        b = index[node["parent"]]
        offset = np.linalg.inv(world[b]) @ np.append(node["position"], 1.0)
        effectors.append(Effector(b, tuple(offset[:3]), f"effector{nid}"))
    return Skeleton(parents, rest, [Joint.hinge("X") for _ in joints_ids], effectors)


def _evaluate(expression: str, times: np.ndarray) -> np.ndarray:
    """One coordinate formula of the demo, e.g. '2.0+3.0*sin(3T)' (implicit products)."""
    code = re.sub(r"(\d)T", r"\1*T", expression.strip())
    return np.asarray(eval(code, {"__builtins__": {}, "sin": np.sin, "T": times})) * np.ones_like(
        times
    )


def buss_kim_targets(shape: str, times: np.ndarray) -> np.ndarray:
    """(F, E, 3) the shape's target positions at times T (the demo's formulas)."""
    formulas = load_shapes()[shape]["targets_at_time_T"]
    out = np.zeros((len(times), len(formulas), 3))
    for e, f in enumerate(formulas):
        out[:, e] = np.stack([_evaluate(c, times) for c in f.strip("[]").split(",")], axis=1)
    return out


def sugihara_arm(link: float = 0.15, effector: float = 0.05) -> Skeleton:
    """Sugihara's (2011) 12-DOF test arm: joint 1 at the origin, four spherical joints each made
    of three revolute axes at one point (hinges about the local Z, Y, X axes on zero-length
    bones, so q = Euler angles as in the paper, with their gimbal singularities), links of
    ``link`` along the local z axis, the effector ``effector`` beyond the fourth joint; q0 = 0
    is the straight, singular arm along +z."""
    parents, rest, joints = [], [], []
    for j in range(4):
        for a, axis in enumerate("ZYX"):
            parents.append(len(parents) - 1)
            rest.append(translation(0, 0, link) if a == 0 and j > 0 else np.eye(4))
            joints.append(Joint.hinge(axis))
    return Skeleton(parents, np.stack(rest), joints, [Effector(11, (0, 0, effector), "tip")])


def planar_chain(lengths: list[float] | tuple[float, ...]) -> Skeleton:
    """A planar chain in the XY plane: bone i is a hinge about Z at the end of bone i-1, links
    along the local X axis with the given lengths, the effector at the end of the last link."""
    n = len(lengths)
    rest = np.stack([np.eye(4) if b == 0 else translation(lengths[b - 1], 0, 0) for b in range(n)])
    joints = [Joint.hinge("Z") for _ in range(n)]
    return Skeleton(
        list(range(-1, n - 1)), rest, joints, [Effector(n - 1, (lengths[-1], 0, 0), "tip")]
    )
