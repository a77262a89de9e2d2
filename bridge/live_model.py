"""A rig read once for live solving: per update only the targets and the current pose are read.

``rig.build_model`` and ``rig.read_frames`` serve any number of frames; a live update solves one
frame, hundreds of times while a target is dragged. ``LiveModel`` keeps what does not change
between updates (the skeleton, index arrays, the prepared single-frame solver, each goal's reach)
and holds no Blender references, so it survives undo and file loads: every update passes the
armature object in. ``model_key`` says when it must be rebuilt.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from mathutils import Matrix, Quaternion
from numpy.typing import NDArray

from ..solvers import Goals as SolverGoals
from ..solvers import Pose, Settings, Solver, SolveResult
from . import full_body, limits, rig, write
from .errors import RigError
from .run import prepare, solve_frames
from .settings import settings_key, solver_settings

Array = NDArray[np.float64]

# Changing a bone's IK settings tags nothing for update: they are read again when the armature
# itself was updated, and at least this often (seconds) while solving.
IK_RECHECK_SECONDS = 0.5

# Blender's IK settings of a pose bone that build_model reads (a change means a rebuild).
IK_ATTRS = (
    *(
        f"{name}_{a}"
        for name in ("lock_ik", "use_ik_limit", "ik_min", "ik_max", "ik_stiffness")
        for a in "xyz"
    ),
    "ik_stretch",
    "rotation_mode",
)


def goal_key(ob: Any) -> tuple[Any, ...]:
    """What of the goals the model depends on (targets by name, weights, chains)."""
    return tuple(
        (
            g.bone,
            g.target.name if g.target is not None else "",
            g.target_bone,
            g.chain_length,
            getattr(g, "chain_root", ""),
            g.use_tail,
            g.position_weight,
            g.rotation_weight,
            g.pole_target.name if g.pole_target is not None else "",
            g.pole_target_bone,
            getattr(g, "type", "REACH"),
            getattr(g, "aim_axis", "Y"),
            getattr(g, "support", False),
        )
        for g in ob.jacobian_ik.goals
        if g.enabled
    )


def rest_key(ob: Any) -> bytes:
    """The armature's rest matrices and bone lengths (edit-mode changes), as bytes."""
    bones = ob.data.bones
    buf = np.empty(len(bones) * 17, dtype=np.float32)
    bones.foreach_get("matrix_local", buf[: len(bones) * 16])
    bones.foreach_get("length", buf[len(bones) * 16 :])
    return bytes(buf.tobytes()) + len(ob.pose.bones).to_bytes(4, "little")


def ik_key(ob: Any, names: list[str]) -> tuple[Any, ...]:
    """The IK settings and rotation modes of the chain bones and the bone hierarchy (slower:
    read only on demand)."""
    pbones = ob.pose.bones
    settings = tuple(
        (*(getattr(pbones[n], a) for a in IK_ATTRS), *pbones[n].lock_rotation) for n in names
    )
    hierarchy = tuple(
        (b.name, b.parent.name if b.parent else "", b.use_connect, b.use_inherit_rotation)
        for b in ob.data.bones
    )
    return settings, hierarchy


def _close(a: Array, b: Array) -> bool:
    """Rotations equal up to float32 storage (what the pose channels hold of ours)."""
    return bool(np.abs(a - b).max() <= 1e-5)


@dataclass
class LiveResult:
    """One live update: the solve's record, each goal's reachability and the timings."""

    result: SolveResult
    goal_names: list[str]
    reachable: NDArray[np.bool_]  # (E,) target within the chain's reach
    read_time: float
    solve_time: float
    write_time: float
    keys: int = 0

    @property
    def total_time(self) -> float:
        return self.read_time + self.solve_time + self.write_time


def build_model(ob: Any) -> rig.RigModel:
    """The rig as ``run`` builds it (``run.prepare``): goals, joint limits and IK stretch, poles."""
    return prepare(ob).model


class LiveModel:
    """The solver's view of one armature, built once; ``update`` reads, solves and writes.

    Raises ``RigError`` (from ``rig.build_model``) when the rig or goals cannot be solved.
    """

    def __init__(self, ob: Any, settings: Settings | None = None) -> None:
        model = build_model(ob)
        self.settings = settings or solver_settings(ob.jacobian_ik)
        self.settings_key = settings_key(ob.jacobian_ik)
        self.goal_key = goal_key(ob)
        self.rest_key = rest_key(ob)
        self.names = model.names
        self.free_names = [model.names[b] for b in model.free]
        self.ik_key = ik_key(ob, self.free_names)
        self.ik_checked = time.monotonic()
        self.skeleton = model.skeleton
        self.solver = Solver(self.skeleton, self.settings)  # prepared once, one frame per call
        self.pose_index = model.pose_index
        self.parents = model.parents
        self.rest = model.rest
        self.free = np.array(model.free, dtype=np.intp)
        self.free_mask = np.zeros(len(model.names), dtype=bool)
        self.free_mask[self.free] = True
        # bones no solve moves (neither free nor below a free bone): their evaluated frames are
        # an input; the others' are our output
        self.static = ~self.free_mask
        for b, p in enumerate(self.parents):
            if p >= 0 and not self.static[p]:
                self.static[b] = False
        self.below = np.flatnonzero(~self.static & ~self.free_mask)
        self.connected = model.connected
        self.warnings = model.warnings
        goals = model.goals
        self.goal_names = [g.bone for g in goals]
        self.target_names = [g.target.name for g in goals]
        self.target_bones = [g.target_bone for g in goals]
        self.position_weight = np.array([g.position_weight for g in goals])
        self.rotation_weight = np.array([g.rotation_weight for g in goals])
        # poles (secondary goals) and IK stretch: read, solved and written as ``run`` does,
        # from a model rebuilt on every update (slower, see ``_update_like_run``)
        self.like_run = self.skeleton.n_effectors > len(goals) or bool(limits.stretch_bones(model))
        # full-body goals (move_root, balance, aim) are solved as ``run`` solves them too
        self.like_run |= model.root >= 0 or model.body is not None
        self.like_run |= full_body.aim_axes(goals) is not None
        self.modes = [ob.pose.bones[n].rotation_mode for n in self.free_names]
        self.quat_free = [k for k, m in enumerate(self.modes) if m == "QUATERNION"]
        self.quat_index = np.array(
            [ob.pose.bones.find(self.free_names[k]) for k in self.quat_free], dtype=np.intp
        )
        self.eye = np.broadcast_to(np.eye(3), (len(self.names), 3, 3)).copy()
        self._reach_setup(goals)
        # the last solve's input and output (skip updates that change nothing; warm start)
        self.last_input: Array | None = None
        self.last_rotations: Array | None = None  # (K, 3, 3) free bones, float64
        # the chain bones' rotations as last set by animation or by hand (not by us)
        self.held: Array | None = None
        self.base_inverse = np.eye(4)

    def _reach_setup(self, goals: list[Any]) -> None:
        """For each goal: the head of its chain's top bone and the chain's full length (model
        units), for reachability: distance from that head to the target versus the length."""
        skel = self.skeleton
        position = {n: i for i, n in enumerate(self.names)}
        self.chain_top = np.empty(len(goals), dtype=np.intp)
        self.reach = np.empty(len(goals))
        for e, g in enumerate(goals):
            b = position[g.bone]
            length = float(np.linalg.norm(skel.eff_offset[e]))
            depth, count = 1, rig.chain_length(g.id_data, g)
            while self.parents[b] >= 0 and (count == 0 or depth < count):
                length += float(np.linalg.norm(self.rest[b, :3, 3]))
                b, depth = int(self.parents[b]), depth + 1
            self.chain_top[e], self.reach[e] = b, length

    def matches(self, ob: Any, check_ik: bool) -> bool:
        """Whether this model still describes ``ob``: its goals and settings (these change
        without tagging anything for update), and, when ``check_ik`` (the armature was updated:
        edit mode tags it) or ``IK_RECHECK_SECONDS`` after the last look, the rest pose, the
        hierarchy and the chains' IK settings (reading those costs about 0.2 ms)."""
        if settings_key(ob.jacobian_ik) != self.settings_key or goal_key(ob) != self.goal_key:
            return False
        now = time.monotonic()
        if not check_ik and now - self.ik_checked < IK_RECHECK_SECONDS:
            return True
        self.ik_checked = now
        return bool(rest_key(ob) == self.rest_key and ik_key(ob, self.free_names) == self.ik_key)

    # -- reading ---------------------------------------------------------------------------
    def read(self, ob: Any, depsgraph: Any = None) -> tuple[Array, Array, Array]:
        """(targets (E, 4, 4) world, base (4, 4), pose-space matrices and bases (2, B, 4, 4)).

        With ``depsgraph`` the armature and the targets are read as that depsgraph evaluated
        them (a render's depsgraph: the originals still hold the viewport's frame)."""

        def evaluated(ob: Any) -> Any:
            return ob if depsgraph is None else ob.evaluated_get(depsgraph)

        goals = [g for g in ob.jacobian_ik.goals if g.enabled]
        targets = np.empty((len(goals), 4, 4))
        if len(goals) != len(self.target_names):
            raise RigError("the goals changed while solving")
        for e, g in enumerate(goals):
            if g.target is None:
                raise RigError(f"{rig.goal_label(e, g)}: no target object")
            target = evaluated(g.target)
            targets[e] = target.matrix_world
            if self.target_bones[e]:
                targets[e] = targets[e] @ np.array(target.pose.bones[self.target_bones[e]].matrix)
        if not np.isfinite(targets).all():
            bad = int(np.flatnonzero(~np.isfinite(targets).reshape(len(goals), -1).all(1))[0])
            raise RigError(f"{rig.goal_label(bad, goals[bad])}: the target's matrix is not finite")
        arm = evaluated(ob)
        world = arm.matrix_world
        base = np.array(world, dtype=np.float64)
        self.base_inverse = np.array(world.inverted_safe(), dtype=np.float64)
        pbones = arm.pose.bones
        buf = np.empty((2, len(pbones) * 16), dtype=np.float32)
        pbones.foreach_get("matrix", buf[0])
        pbones.foreach_get("matrix_basis", buf[1])
        bones = np.swapaxes(buf.reshape(2, -1, 4, 4), 2, 3)[:, self.pose_index]
        return targets, base, bones.astype(np.float64)

    def start_pose(self, bones: Array, start: str = "current") -> Pose:
        """The start pose: chain bones from their channels (the last solve's exact rotations
        when the channels still hold them), the bones below them from their evaluated matrices
        relative to their parents. The bones above the chains are taken as evaluated (their
        frames are passed to the solver as they are) and get their rest pose here.

        ``start`` (the chain bones): "current" their channels as above; "animated" (on a frame
        change) the animated pose: a bone whose channels hold our last write (not animated)
        starts from the value it had before live solving wrote it (``held``), any other from
        its channels, so the result at a frame does not depend on the frames solved before."""
        evaluated, basis = bones
        n = len(self.names)
        rot = self.eye.copy()
        loc = np.zeros((n, 3))
        free_rot = basis[self.free, :3, :3]
        if self.last_rotations is None:
            ours = np.zeros(len(self.free), dtype=bool)
        else:
            ours = np.abs(free_rot - self.last_rotations).max(axis=(1, 2)) <= 1e-5
        if self.held is None:
            self.held = rig.nearest_rotation(free_rot)
        else:  # channels set by animation or by hand since our last write: the new hold
            self.held[~ours] = rig.nearest_rotation(free_rot[~ours])
        if start == "animated":
            rot[self.free] = self.held
        elif ours.all():
            rot[self.free] = self.last_rotations  # warm start from the exact last result
        else:
            rot[self.free] = rig.nearest_rotation(free_rot)
        loc[self.free] = basis[self.free, :3, 3]
        # fixed bones under a chain bone (and, for solve(), all fixed bones): their evaluated
        # local transforms
        below = np.flatnonzero(~self.free_mask)
        if len(below):
            parents = self.parents[below]
            parent_frame = self.rest[below].copy()
            has_parent = parents >= 0
            parent_frame[has_parent] = evaluated[parents[has_parent]] @ self.rest[below][has_parent]
            local = np.linalg.inv(parent_frame) @ evaluated[below]
            rot[below] = rig.nearest_rotation(local[:, :3, :3])
            loc[below] = local[:, :3, 3]
        loc[self.connected] = 0.0
        return Pose(rot[None], loc[None], np.zeros((1, n)))

    def unchanged(self, targets: Array, base: Array, bones: Array) -> bool:
        """Nothing this model solves for moved since the last write (our own write included)."""
        if self.last_input is None or self.last_rotations is None:
            return False
        now = np.concatenate(
            [targets.reshape(-1), base.reshape(-1), bones[0, self.static].reshape(-1)]
        )
        if now.shape != self.last_input.shape or not (now == self.last_input).all():
            return False
        return _close(bones[1, self.free, :3, :3], self.last_rotations)

    def _remember(self, targets: Array, base: Array, bones: Array, rotations: Array) -> None:
        self.last_input = np.concatenate(
            [targets.reshape(-1), base.reshape(-1), bones[0, self.static].reshape(-1)]
        )
        self.last_rotations = rotations

    # -- solving ---------------------------------------------------------------------------
    def solve(self, targets: Array, base: Array, pose: Pose, frames: Array) -> SolveResult:
        """Solve from ``pose``; ``frames`` (B, 4, 4) are the evaluated model-space frames, used
        for the bones above the chains."""
        rotation = targets[:, :3, :3] if np.any(self.rotation_weight > 0) else None
        goals = SolverGoals(
            position=targets[None, :, :3, 3],
            rotation=None if rotation is None else rig.nearest_rotation(rotation)[None],
            position_weight=self.position_weight,
            rotation_weight=self.rotation_weight,
            base=base,
        )
        return self.solver.solve(goals, pose=pose)

    def reachable(self, targets: Array, base: Array, bones: Array) -> NDArray[np.bool_]:
        """Each goal's target within its chain's reach: the distance from the head of the
        chain's top bone (which the chain does not move) to the target, in model space."""
        top = bones[0, self.chain_top, :3, 3]
        inv = self.base_inverse
        local = targets[:, :3, 3] @ inv[:3, :3].T + inv[:3, 3]
        distance = np.sqrt(np.einsum("ei,ei->e", local - top, local - top))
        return np.asarray(distance <= self.reach * (1.0 + 1e-6) + 1e-9)

    # -- writing ---------------------------------------------------------------------------
    def write(self, ob: Any, rotations: Array) -> None:
        """Set the chain bones' rotation channels in each bone's rotation mode, next to the
        current values (quaternions in the current hemisphere, Euler angles compatible with
        the current ones, as Blender's own transform tools keep them)."""
        pbones = ob.pose.bones
        matrices = rotations.tolist()
        if self.quat_index.size:
            # all quaternion channels at once: read, replace the chain's, write back, tag
            quats = np.empty(len(pbones) * 4, dtype=np.float32)
            pbones.foreach_get("rotation_quaternion", quats)
            current = quats.reshape(-1, 4)[self.quat_index]
            new = np.array([Matrix(matrices[k]).to_quaternion() for k in self.quat_free])
            new *= np.where(np.einsum("ki,ki->k", new, current) < 0.0, -1.0, 1.0)[:, None]
            quats.reshape(-1, 4)[self.quat_index] = new
            pbones.foreach_set("rotation_quaternion", quats)
            ob.update_tag(refresh={"DATA"})  # foreach_set tags nothing: re-evaluate the pose
        for name, mode, r in zip(self.free_names, self.modes, matrices, strict=True):
            if mode == "QUATERNION":
                continue
            pb = pbones[name]
            m = Matrix(r)
            if mode == "AXIS_ANGLE":
                q = m.to_quaternion()
                current = pb.rotation_axis_angle
                q.make_compatible(Quaternion(current[1:], current[0]))
                axis, angle = q.to_axis_angle()
                pb.rotation_axis_angle = (angle, axis[0], axis[1], axis[2])
            else:
                pb.rotation_euler = m.to_euler(mode, pb.rotation_euler)

    def keyframe(self, ob: Any, frame: int) -> int:
        """Key the chain bones' rotation channels at ``frame``; returns the keys written."""
        keys = 0
        for name in self.free_names:
            pb = ob.pose.bones[name]
            attr = write.rotation_attr(pb.rotation_mode)
            pb.keyframe_insert(attr, frame=frame, group=name)
            keys += 4 if attr != "rotation_euler" else 3
        return keys

    def key_pose(self, ob: Any, frame: int) -> int:
        """Key at ``frame`` every channel an update writes (the chain bones' rotations; with
        IK stretch their scale, with move_root the root's location) as they are now; returns
        the keys written. Live solving keys once when a drag ends, with this."""
        keys = self.keyframe(ob, frame)
        if self.like_run:
            model = build_model(ob)
            channels = [(model.names[b], "scale") for b in limits.stretch_bones(model)]
            if model.root >= 0:
                channels.append((model.names[model.root], "location"))
            for name, attr in channels:
                ob.pose.bones[name].keyframe_insert(attr, frame=frame, group=name)
                keys += 3
        return keys

    def update(
        self,
        ob: Any,
        *,
        keyframe_at: int | None = None,
        force: bool = False,
        start: str = "current",
        depsgraph: Any = None,
    ) -> LiveResult | None:
        """Read the targets and current pose (as ``depsgraph`` evaluated them, when given),
        solve from ``start`` (see ``start_pose``) and write the chain's channels (keyed at
        ``keyframe_at`` when given). None when nothing moved since the last update (unless
        ``force``)."""
        if self.like_run:
            return self._update_like_run(ob, keyframe_at)
        t0 = time.perf_counter()
        targets, base, bones = self.read(ob, depsgraph)
        if not force and self.unchanged(targets, base, bones):
            return None
        pose = self.start_pose(bones, start)
        t1 = time.perf_counter()
        result = self.solve(targets, base, pose, bones[0])
        t2 = time.perf_counter()
        rotations = result.pose.rotations[0, self.free]
        self.write(ob, rotations)
        keys = 0 if keyframe_at is None else self.keyframe(ob, keyframe_at)
        self._remember(targets, base, bones, rotations)
        reachable = self.reachable(targets, base, bones)
        t3 = time.perf_counter()
        return LiveResult(
            result,
            self.goal_names,
            reachable,
            t1 - t0,
            t2 - t1,
            t3 - t2,
            keys,
        )

    def _update_like_run(self, ob: Any, keyframe_at: int | None) -> LiveResult:
        """A rig with poles, IK stretch or full-body goals: solved as ``run`` solves the
        current frame (the model rebuilt, no warm start for chains with a pole), every update."""
        t0 = time.perf_counter()
        result, model, t1 = self.solve_like_run(ob)
        t2 = time.perf_counter()
        keys = self.write_like_run(ob, model, result, keyframe_at)
        targets, base, bones = self.read(ob)
        reachable = self.reachable(targets, base, bones)
        t3 = time.perf_counter()
        return LiveResult(result, self.goal_names, reachable, t1 - t0, t2 - t1, t3 - t2, keys)

    def solve_like_run(self, ob: Any) -> tuple[SolveResult, rig.RigModel, float]:
        """Solve the current frame as ``run`` does (no writing): the result, the model and when
        the reading ended (``time.perf_counter``)."""
        prepared = prepare(ob)
        _, _, result, t1 = solve_frames(ob, prepared, [0], lambda _frame: None, self.settings)
        return result, prepared.model, t1

    def write_like_run(
        self, ob: Any, model: rig.RigModel, result: SolveResult, keyframe_at: int | None
    ) -> int:
        """Write (and key at ``keyframe_at``) a ``solve_like_run`` result; returns the keys."""
        rotations = result.pose.rotations[0, model.free]
        self.write(ob, rotations)
        if model.root >= 0:  # move_root: the root's location (its rotation is written above)
            root = ob.pose.bones[model.names[model.root]]
            root.location = result.pose.locations[0, model.root].tolist()
        stretched = limits.stretch_bones(model)
        if stretched:
            channels = limits.stretch_channels(ob, model, result.pose.stretch[:, stretched])
            write.set_pose_channels(ob, channels)
        keys = 0
        if keyframe_at is not None:
            keys = self.keyframe(ob, keyframe_at)
            for b in stretched:
                ob.pose.bones[model.names[b]].keyframe_insert("scale", frame=keyframe_at)
                keys += 3
            if model.root >= 0:
                name = model.names[model.root]
                ob.pose.bones[name].keyframe_insert("location", frame=keyframe_at, group=name)
                keys += 3
        return keys
