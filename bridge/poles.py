"""Pole goals: a goal's chain bends toward a pole object or bone, with no pole angle to type in.

The pole is ``goal.pole_target``, or the head of its bone ``goal.pole_target_bone`` when the
pole target is an armature (the goal's own armature too: Rigify's knee and elbow controls),
read at every frame after the scene is evaluated.

For a goal with ``pole_target`` the bridge adds one more effector at the chain's middle joint
and gives it the pole object's world position as a *secondary* target (``Goals.secondary``):
the solver moves it only in the null space of the primary goals (a task-priority step), so the
foot or hand still reaches its target and the knee or elbow swings toward the pole, whatever
the rest pose and however many goals share the tree. A pole never decides convergence.

The middle joint is the chain's interior joint nearest the middle of the chain measured along
the bones at rest: the joints are the heads of the chain's bones below its top bone (the top
bone's head is the chain's fixed base), plus the goal bone's own head when the effector is its
tail. For thigh-shin-foot with the effector at the foot's tail (0.45 + 0.45 + 0.18) that is the
head of the shin (the knee); for upper_arm-forearm-hand, the head of the forearm (the elbow).

The secondary target is not the pole object itself but the point of the knee's swivel circle
on the pole's side: with H the head of the middle joint's parent bone (the hip), T the goal's
target, a = |knee - H| and b = |effector - knee| at rest (straight lines), the knee of a
two-segment limb reaching T lies at x = (a^2 - b^2 + d^2) / 2d along HT (d = |T - H|, clamped
to a + b) and h = sqrt(a^2 - x^2) away from it, toward the pole. A target the chain can reach
together with the goal: pulling the knee to the pole object itself would drag the limb to its
straight, singular edge and cost the goal accuracy. (H is read from the frame's start pose.)

In Converge mode the chains with a pole start every frame from their rest pose: the solver
stops as soon as the primary goals are reached, so a chain that starts on its target (the last
solve's pose) would never swing toward a pole that moved. A chain alone in its IK tree is first
twisted about its base so that its rest bend faces the pole (``aim_chains``, as Blender's IK
turns a chain toward its pole before it solves it), so the bones turn with the plane the pole
sets rather than bending sideways. (Track mode keeps its warm start: every step takes the
pole's null-space step.)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..solvers import Effector, Goals, Pose, Skeleton
from ..solvers.so3 import exp_so3
from .rig import RigModel, chain_length, chain_names, goal_label, pole_position

Array = NDArray[np.float64]


@dataclass
class Pole:
    """A pole effector (the head of skeleton bone ``bone``) pulled toward ``target``."""

    goal_index: int  # index into RigModel.goals
    bone: int  # skeleton bone whose head is the middle joint
    target: Any  # the pole object
    target_bone: str  # its bone whose head is the pole ("" for the object itself)
    upper: str  # the middle joint's parent bone (its head is H)
    a: float  # rest distance H - middle joint (armature units)
    b: float  # rest distance middle joint - effector
    goal: Any  # the goal item (its target)
    chain: list[int]  # the goal's chain (skeleton bones)
    angle: float = 0.0  # the goal's pole_angle: the bend's side turned from the pole's


def chain_of(model: RigModel, bone: int, chain_length: int) -> list[int]:
    """Skeleton bones of a chain, from the goal bone up (chain_length 0: up to the root)."""
    chain = [bone]
    while model.parents[chain[-1]] >= 0 and (chain_length == 0 or len(chain) < chain_length):
        chain.append(int(model.parents[chain[-1]]))
    return chain


def middle_joint(model: RigModel, chain: list[int], tail: float | None) -> int | None:
    """The chain bone whose head is the interior joint nearest the chain's middle, or None.

    ``tail``: the goal bone's length when the effector is its tail, None for its head.
    """
    # head-to-parent-head lengths
    k = middle_index([float(np.linalg.norm(model.rest[b, :3, 3])) for b in chain], tail)
    return None if k is None else chain[k]


def middle_index(steps: list[float], tail: float | None) -> int | None:
    """``middle_joint`` by the chain's head-to-parent-head lengths ``steps`` (goal bone first):
    the index in the chain of the bone whose head is the middle joint, or None."""
    first = 0 if tail is not None else 1
    candidates = list(range(first, len(steps) - 1))
    if not candidates:
        return None

    def from_base(k: int) -> float:  # arc length from the top bone's head to chain[k]'s head
        return sum(steps[k : len(steps) - 1])

    total = from_base(0) + (tail or 0.0)
    return min(candidates, key=lambda k: (abs(from_base(k) - 0.5 * total), -k))


def bend_direction(heads: Array, k: int, effector: Array) -> Array:
    """The middle joint's bend (not normalised): its offset from the line between the head of
    the bone above it and the end of the bone below it. ``heads`` (..., L, 3) the chain's bone
    heads, goal bone first (the last is the base), ``k`` the middle joint's index."""
    upper = heads[..., k + 1, :]
    lower = heads[..., k - 1, :] if k > 0 else effector
    line, _ = _unit(lower - upper)
    knee = heads[..., k, :] - upper
    return np.asarray(knee - np.einsum("...i,...i->...", knee, line)[..., None] * line)


def blender_pole_angle(ob: Any, goal: Any, angle: float) -> float:
    """The ``pole_angle`` of ``goal`` (its bone, chain and use_tail set) that bends its chain as
    Blender's IK constraint with pole angle ``angle`` does. Blender turns the chain so that the
    top bone's X axis turned by the pole angle about its Y axis (X cos a + Z sin a, across the
    line from the chain's base to its effector) points at the pole (intern/iksolver
    IK_QJacobianSolver::ConstrainPoleVector); we turn the middle joint's bend toward the pole
    turned by ``pole_angle``, so it is the angle from Blender's direction to the bend at rest,
    about that line. 0 when either is undefined (a straight chain)."""
    tail = bool(goal.use_tail)
    chain = [ob.data.bones[n] for n in chain_names(ob, goal)]
    heads = np.array([b.head_local for b in chain], dtype=float)
    parents = [b.parent.head_local if b.parent is not None else (0, 0, 0) for b in chain]
    steps = [float(np.linalg.norm(h - np.array(p))) for h, p in zip(heads, parents, strict=True)]
    k = middle_index(steps, chain[0].length if tail else None)
    effector = np.array(chain[0].tail_local if tail else chain[0].head_local, dtype=float)
    d0, ok = _unit(effector - heads[-1])
    if k is None or not ok:
        return 0.0
    bend = bend_direction(heads, k, effector)
    u0, ok_bend = _unit(bend - np.dot(bend, d0) * d0)
    top = np.array(chain[-1].matrix_local, dtype=float)
    up = top[:3, 0] * math.cos(angle) + top[:3, 2] * math.sin(angle)
    up, ok_up = _unit(up - np.dot(up, d0) * d0)
    if not (ok_bend and ok_up):
        return 0.0
    return float(math.atan2(np.dot(d0, np.cross(up, u0)), np.dot(up, u0)))


def turn_side(side: Array, axis: Array, angle: float) -> Array:
    """``side`` (..., 3), across the unit ``axis``, turned by ``angle`` about it."""
    if angle == 0.0:
        return side
    return np.asarray(side * math.cos(angle) + np.cross(axis, side) * math.sin(angle))


def find_poles(ob: Any, model: RigModel) -> tuple[list[Pole], list[str]]:
    """The poles of ``model``'s goals (those with a pole object), and warnings."""
    position = {n: i for i, n in enumerate(model.names)}
    poles, warnings = [], []
    for e, g in enumerate(model.goals):
        pole_target = getattr(g, "pole_target", None)
        if pole_target is None:
            continue
        pole_bone = getattr(g, "pole_target_bone", "")
        if pole_bone and (pole_target.pose is None or pole_bone not in pole_target.pose.bones):
            warnings.append(
                f"{goal_label(e, g)}: pole target {pole_target.name!r} has no bone "
                f"{pole_bone!r}, pole ignored"
            )
            continue
        chain = chain_of(model, position[g.bone], chain_length(ob, g))
        tail = float(ob.data.bones[g.bone].length) if g.use_tail else None
        bone = middle_joint(model, chain, tail)
        if bone is None:
            warnings.append(f"{goal_label(e, g)}: the chain has no middle joint, pole ignored")
            continue
        bones = ob.data.bones
        upper = bones[model.names[int(model.parents[bone])]]
        knee = np.array(bones[model.names[bone]].head_local)
        tip = bones[g.bone].tail_local if g.use_tail else bones[g.bone].head_local
        a = float(np.linalg.norm(knee - np.array(upper.head_local)))
        b = float(np.linalg.norm(np.array(tip) - knee))
        angle = float(getattr(g, "pole_angle", 0.0))
        poles.append(Pole(e, bone, pole_target, pole_bone, upper.name, a, b, g, chain, angle))
    return poles, warnings


def add_poles(model: RigModel, poles: list[Pole]) -> RigModel:
    """``model`` with one more effector (a middle joint's head) per pole, after the goals'."""
    if not poles:
        return model
    skel = model.skeleton
    effectors = list(skel.effectors) + [  # on its goal's chain
        Effector(p.bone, (0.0, 0.0, 0.0), name=f"{model.names[p.bone]} pole", chain=_chain(skel, p))
        for p in poles
    ]
    skeleton = Skeleton(model.parents, model.rest, skel.joints, effectors, names=model.names)
    return replace(model, skeleton=skeleton)


def _chain(skel: Skeleton, pole: Pole) -> tuple[int, ...] | None:
    return skel.effectors[pole.goal_index].chain


def _apply(m: Array, p: Array) -> Array:
    return np.asarray(m[:3, :3] @ p + m[:3, 3])


def swivel_point(
    hip: Array, target: Array, pole: Array, a: float, b: float, angle: float = 0.0
) -> Array:
    """The knee of a two-segment limb (lengths a, b) from ``hip`` reaching ``target``, bent
    toward ``pole`` (see the module docstring), turned by ``angle`` about the line from the
    hip to the target; the pole itself when it lies on the axis."""
    axis = target - hip
    d = float(np.linalg.norm(axis))
    if d < 1e-9:
        return pole
    u = axis / d
    d = min(d, a + b)
    x = (a * a - b * b + d * d) / (2.0 * d)
    h = math.sqrt(max(a * a - x * x, 0.0))
    side = (pole - hip) - np.dot(pole - hip, u) * u
    n = float(np.linalg.norm(side))
    if n < 1e-9:
        return pole
    return np.asarray(hip + x * u + h * turn_side(side / n, u, angle))


STRAIGHT = 1e-3
"""A chain whose middle joint lies within this share of its limb's length of the line through
the joints either side is straight: ``aim_chains`` leaves it as it is."""


PLANE_SINE = 0.5
"""A pole this far off the line from a chain's base to its target (the sine of the angle,
30 degrees) turns the chain fully toward it (``aim_chains``); nearer the line, less."""


def _unit(v: Array) -> tuple[Array, NDArray[np.bool_]]:
    """Unit vectors of (F, 3) and which were long enough to have a direction."""
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    ok = n[..., 0] > 1e-9
    return v / np.where(ok[..., None], n, 1.0), ok


def aimable(skeleton: Skeleton, poles: list[Pole], free: list[int]) -> list[int]:
    """The poles whose chain ``aim_chains`` may turn: its top bone is a free ball joint
    without rotation limits, and no other goal moves a bone of it (alone in its IK tree, where
    Blender's IK applies a pole too)."""
    n_goals = skeleton.n_effectors - len(poles)
    moves = skeleton.dof_moves
    out = []
    for i, p in enumerate(poles):
        top = p.chain[-1]
        joint = skeleton.joints[top]
        if top not in free or joint.rotation_axes != "XYZ":
            continue
        if any(k in joint.limits for k in ("rot_x", "rot_y", "rot_z")):
            continue
        others = [e for e in range(n_goals) if e != p.goal_index]
        if others and np.any(moves[others] & moves[p.goal_index]):
            continue
        out.append(i)
    return out


def aim_chains(
    pose: Pose,
    skeleton: Skeleton,
    poles: list[Pole],
    free: list[int],
    reads: list[tuple[Array, Array, Array, Array]],
) -> None:
    """Twist each chain with a pole (``aimable``) as a whole about the line from its base H
    (the top bone's head) to its effector, so that its bend faces where the pole will be once
    the solve has swung it to the target: the twist about d0 (H to the effector) that turns
    u0 (the middle joint's bend, across d0) onto v, the pole's direction u1 (across d1, H to
    the target) taken back to d0 by the shortest rotation from d1 to d0. The solve then swings
    the chain to its target by about that shortest rotation and bends it. Blender's IK turns a
    chain with a pole target the same way before it solves it (intern/iksolver
    IK_QJacobianSolver::ConstrainPoleVector: "look-at" frames of the chain and of the goal
    and pole), there with the user's pole angle, here with the one that puts the middle joint
    toward the pole; it also swings the chain onto the target line, which left the solve a
    straight chain pointing at its target (twice the iterations on the demo's arms). From
    rest without the twist the bones did not turn with the plane the pole sets: a leg whose
    pole swings around it ended with thigh and shin 70-80 degrees about their own axes off
    Blender's, the knee bending sideways (now 2-7 degrees; Rigify's arms 1.0 against 2.0).
    The twist fades out as the pole nears the line from H to the target (``PLANE_SINE``),
    where its side is ill-defined: a motion capture pole set at the source's knee crosses
    that line whenever the knee straightens, and the full twist followed it (the walk of
    scripts/mocap.sh: 49 joint jumps before the flip repair against 5 from rest; with the
    fade 6). Frames where a direction is undefined (a chain straight at rest, ``STRAIGHT``)
    keep the rest pose. In place, for the frames of ``reads``."""
    chosen = aimable(skeleton, poles, free)
    if not chosen or len(reads) != pose.frames:
        return
    kin = skeleton.forward_kinematics(pose)
    for i in chosen:
        p = poles[i]
        top = p.chain[-1]
        base = kin.head[:, top]
        pole = np.stack([r[1][i] for r in reads])
        target = np.stack([r[2][i] for r in reads])
        d0, ok0 = _unit(kin.points[:, p.goal_index] - base)
        d1, ok1 = _unit(target - base)
        # the middle joint's bend, across d0
        k = p.chain.index(p.bone)
        upper = kin.head[:, p.chain[k + 1]]
        lower = kin.head[:, p.chain[k - 1]] if k > 0 else kin.points[:, p.goal_index]
        bend = bend_direction(kin.head[:, p.chain], k, kin.points[:, p.goal_index])
        u0, _ = _unit(bend - np.einsum("fi,fi->f", bend, d0)[:, None] * d0)
        # a chain straight at rest (to a thousandth of its length) has no bend to turn
        ok2 = np.linalg.norm(bend, axis=1) > STRAIGHT * np.linalg.norm(lower - upper, axis=1)
        side = pole - base
        across = side - np.einsum("fi,fi->f", side, d1)[:, None] * d1
        u1, ok3 = _unit(across)
        u1 = turn_side(u1, d1, p.angle)  # the side the bend should face
        # how clearly the pole sets a plane: the sine of its angle off the line to the target
        sine = np.linalg.norm(across, axis=1) / np.maximum(np.linalg.norm(side, axis=1), 1e-300)
        # v: the pole's direction u1 taken back by the shortest rotation from d1 to d0,
        # R = I + [c]x + [c]x^2 / (1 + s), c = d1 x d0, s = d1 . d0 (undefined when opposite)
        c = np.cross(d1, d0)
        s = np.einsum("fi,fi->f", d1, d0)
        ok = ok0 & ok1 & ok2 & ok3 & (s > -1.0 + 1e-9)
        cu = np.cross(c, u1)
        v = u1 + cu + np.cross(c, cu) / np.where(ok, 1.0 + s, 1.0)[:, None]
        # Q: the twist about d0 that turns u0 onto v
        angle = np.arctan2(np.einsum("fi,fi->f", d0, np.cross(u0, v)), np.einsum("fi,fi->f", u0, v))
        # the full twist where the pole is PLANE_SINE or more off the line, fading to none on
        # it: a pole crossing the line (a straight knee in motion capture) flips u1, and the
        # twist with it, from one frame to the next
        q = exp_so3(d0 * (angle * np.minimum(sine / PLANE_SINE, 1.0))[:, None])
        pre = kin.pre[:, top]
        # the top bone's frame pre R becomes Q pre R: R' = pre^T Q pre R
        turned = np.swapaxes(pre, -1, -2) @ q @ pre @ pose.rotations[:, top]
        pose.rotations[ok, top] = turned[ok]


class PoleReader:
    """Records the poles' world positions each time the scene is evaluated at a frame."""

    def __init__(self, ob: Any, poles: list[Pole]) -> None:
        self.ob, self.poles = ob, poles
        self.positions: list[Array] = []
        # per read: the armature's world matrix, poles, targets and hips (the ``upper`` bones'
        # heads) in model space (``follow``, ``unscale``)
        self.inputs: list[tuple[Array, Array, Array, Array]] = []

    def wrap(self, evaluate: Callable[[int], None], depsgraph: Any = None) -> Callable[[int], None]:
        """``evaluate`` followed by reading the poles (as ``depsgraph`` evaluated them)."""

        def ev(ob: Any) -> Any:
            return ob if depsgraph is None else ob.evaluated_get(depsgraph)

        def evaluate_and_read(frame: int) -> None:
            evaluate(frame)
            world = np.array(ev(self.ob).matrix_world, dtype=float)
            inv = np.linalg.inv(world)
            out = np.empty((len(self.poles), 3))
            poles_model, targets_model = np.empty_like(out), np.empty_like(out)
            hips = np.empty_like(out)
            for i, p in enumerate(self.poles):
                pole = pole_position(ev(p.target), p.target_bone)
                goal_target = ev(p.goal.target)
                if p.goal.target_bone:
                    head = goal_target.pose.bones[p.goal.target_bone].head
                    target = np.array(goal_target.matrix_world @ head, dtype=float)
                else:
                    target = np.array(goal_target.matrix_world.translation, dtype=float)
                hips[i] = np.array(ev(self.ob).pose.bones[p.upper].head, dtype=float)
                poles_model[i], targets_model[i] = _apply(inv, pole), _apply(inv, target)
                knee = swivel_point(hips[i], targets_model[i], poles_model[i], p.a, p.b, p.angle)
                out[i] = _apply(world, knee)
            self.positions.append(out)
            self.inputs.append((world, poles_model, targets_model, hips))

        return evaluate_and_read if self.poles else evaluate

    def follow(self, hips: Array) -> None:
        """Recompute the swivel points of the last F reads with the hips (the heads of the
        ``upper`` bones) at ``hips`` (F, P, 3, model space): a root freed by ``move_root``
        carried them away from where the frame started (bridge/full_body.py)."""
        first = len(self.positions) - len(hips)
        for k in range(len(hips)):
            world, poles_model, targets_model, _ = self.inputs[first + k]
            for i, p in enumerate(self.poles):
                knee = swivel_point(hips[k, i], targets_model[i], poles_model[i], p.a, p.b, p.angle)
                self.positions[first + k][i] = _apply(world, knee)
            self.inputs[first + k] = (world, poles_model, targets_model, hips[k])

    def unscale(self, maps: Array) -> None:
        """The last F reads moved into the solver's unscaled model by ``maps`` (F, P, 4, 4)
        (``rig.scale_maps``, a bone above the chains scaled): the poles, targets and hips
        mapped, the swivel points computed again there (the rest lengths a, b are the
        unscaled model's)."""
        first = len(self.positions) - len(maps)
        for k in range(len(maps)):
            world, poles_model, targets_model, hips = self.inputs[first + k]
            moved = [
                np.array([_apply(maps[k, i], x[i]) for i in range(len(self.poles))])
                for x in (poles_model, targets_model, hips)
            ]
            self.inputs[first + k] = (world, moved[0], moved[1], moved[2])
        self.follow(np.stack([self.inputs[first + k][3] for k in range(len(maps))]))

    def reset_start(self, pose: Pose, model: RigModel) -> None:
        """Start the free bones of the chains with a pole from their rest rotations, each such
        chain then turned as a whole toward its target and pole (``aim_chains``); in place,
        for the last F reads (F = the pose's frames)."""
        if not self.poles:
            return
        bones = sorted({b for p in self.poles for b in p.chain} & set(model.free))
        pose.rotations[:, bones] = np.eye(3)
        aim_chains(pose, model.skeleton, self.poles, model.free, self.inputs[-pose.frames :])

    def goals(self, goals: Goals, frames: int) -> Goals:
        """``goals`` with the poles appended as secondary position goals (weight 1)."""
        if not self.poles:
            return goals
        pole_pos = np.stack(self.positions[-frames:])  # the last F reads are the frames
        n_pole = len(self.poles)
        position = np.concatenate([np.asarray(goals.position), pole_pos], axis=1)
        rotation = goals.rotation
        if rotation is not None:
            eye = np.broadcast_to(np.eye(3), (frames, n_pole, 3, 3))
            rotation = np.concatenate([np.asarray(rotation), eye], axis=1)
        n_goal = position.shape[1] - n_pole
        return Goals(
            position=position,
            rotation=rotation,
            position_weight=np.concatenate(
                [
                    np.broadcast_to(np.asarray(goals.position_weight, float), (n_goal,)),
                    np.ones(n_pole),
                ]
            ),
            rotation_weight=np.concatenate(
                [
                    np.broadcast_to(np.asarray(goals.rotation_weight, float), (n_goal,)),
                    np.zeros(n_pole),
                ]
            ),
            base=goals.base,
            secondary=np.arange(n_goal + n_pole) >= n_goal,
            # full-body goals (bridge/full_body.py): the poles neither aim nor support
            aim=None
            if goals.aim is None
            else np.concatenate([np.asarray(goals.aim, float), np.zeros((n_pole, 3))]),
            support=None
            if goals.support is None
            else np.concatenate([np.asarray(goals.support, bool), np.zeros(n_pole, bool)]),
            balance=goals.balance,
        )
