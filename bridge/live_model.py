"""A rig prepared once for live solving; every update reads, solves and writes as a bake does.

A live update solves one frame, hundreds of times while a target is dragged. ``LiveModel`` keeps
what does not change between updates: the rig read into the solver model (``run.prepare``:
goals, joint limits, IK stretch, poles, full-body goals), the prepared one-frame ``Solver`` and
each goal's reach. Each update goes through the bake's own path: ``run.solve_frames`` reads the
frame (``rig.read_frames``, the poles' reader; from a render's depsgraph when given) and solves
it, and ``pose_channels`` turns the result into the channels ``write.set_pose_channels`` sets
(the bake keys the same channels). What live adds, through ``run.LiveHooks``: the prepared
solver, the start pose (the last result while dragging, see ``start_pose``) and skipping an
update whose inputs did not change. Every update passes the armature object in and points the
model's goal items and pole objects at the current ones first, so the model survives undo and
file loads; ``matches`` says when it must be rebuilt.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from mathutils import Matrix
from numpy.typing import NDArray

from ..solvers import Goals, Pose, Settings, Solver, SolveResult
from . import full_body, limits, poles, rig, write
from .errors import RigError
from .run import LiveHooks, Prepared, prepare, solve_frames
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
            getattr(g, "use_transform_locks", True),
            getattr(g, "use_stretch", True),
            g.position_weight,
            g.rotation_weight,
            g.pole_target.name if g.pole_target is not None else "",
            g.pole_target_bone,
            getattr(g, "pole_angle", 0.0),
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


def ik_key(ob: Any, names: list[str], model_names: list[str]) -> tuple[Any, ...]:
    """The IK settings and rotation modes of the chain bones ``names`` and the hierarchy of the
    model's bones (a bone reparented into or out of the model changes the parent of one of them;
    slower: read only on demand, every armature update when the targets are its own bones, as
    on a Rigify rig, where the whole armature's 706 bones took 1.4 ms an update)."""
    pbones, bones = ob.pose.bones, ob.data.bones
    if any(bones.get(n) is None for n in model_names):
        return None, None  # a bone of the model was renamed or removed
    settings = tuple(
        (*(getattr(pbones[n], a) for a in IK_ATTRS), *pbones[n].lock_rotation) for n in names
    )
    hierarchy = tuple(
        (b.parent.name if b.parent else "", b.use_connect, b.use_inherit_rotation)
        for b in (bones[n] for n in model_names)
    )
    return settings, hierarchy


# How a frame change starts its solve (``LiveModel.solve(start="frame")``, docs/live.md):
# "previous" from the neighbouring frame's solution (the frame solved last, one frame away;
# playing forward or backward), else (a jump) from the animated pose; when the neighbour's start
# leaves a goal within reach unmet, the animated start is tried too and kept if it meets more.
# "animated": always from the animated pose. "hybrid": from the animated pose, and when that
# turns a joint more than FLIP_ANGLE from the neighbour's solution, from the neighbour's solution
# too, kept when it meets every goal the first met.
FRAME_START = "previous"
FLIP_ANGLE = np.radians(10.0)


class Unchanged(Exception):
    """Raised by the start hook: nothing the solve reads moved since the last write."""


def _close(a: Array, b: Array) -> bool:
    """Rotations equal up to float32 storage (what the pose channels hold of ours)."""
    return bool(a.shape == b.shape and np.abs(a - b).max(initial=0.0) <= 1e-5)


def joint_angles(a: Array, b: Array) -> Array:
    """(K,) angle between rotations a[k] and b[k] (K, 3, 3), radians."""
    cos = (np.einsum("kij,kij->k", a, b) - 1.0) / 2.0
    return np.asarray(np.arccos(np.clip(cos, -1.0, 1.0)))


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
    candidates: int = 1  # solves made (2: a frame change also solved from the neighbour)
    # what was solved (for ``LiveModel.write``): the goals, the start pose, the scene frame
    goals: Goals | None = None
    start: Pose | None = None
    frame: int | None = None
    # (E,) the goals' errors in the scene over the solver's (a bone above the chains scaled:
    # ``rig.FrameData.error_scale``), None when 1
    error_scale: Array | None = None

    @property
    def total_time(self) -> float:
        return self.read_time + self.solve_time + self.write_time


def _no_evaluation(_frame: int) -> None:
    """Live reads the scene as it was evaluated (by the handler's depsgraph)."""


class LiveModel:
    """The solver's view of one armature, built once; ``update`` reads, solves and writes.

    Raises ``RigError`` (from ``run.prepare``) when the rig or goals cannot be solved.
    """

    def __init__(self, ob: Any, settings: Settings | None = None) -> None:
        prepared = prepare(ob)
        model = self.model = prepared.model
        self.poles = prepared.poles.poles
        self.settings = settings or solver_settings(ob.jacobian_ik)
        self.settings_key = settings_key(ob.jacobian_ik)
        self.goal_key = goal_key(ob)
        self.rest_key = rest_key(ob)
        self.names = model.names
        self.free = np.array(model.free, dtype=np.intp)
        self.free_names = [model.names[b] for b in model.free]
        self.pose_at = dict(zip(model.names, model.pose_index.tolist(), strict=True))
        self.ik_key = ik_key(ob, self.free_names, self.names)
        self.ik_checked = time.monotonic()
        self.skeleton = model.skeleton
        self.solver = Solver(self.skeleton, self.settings)  # prepared once, one frame per call
        self.parents = model.parents
        self.rest = model.rest
        self.fixed = np.ones(len(model.names), dtype=bool)
        self.fixed[self.free] = False
        # chains with a pole start from rest (``PoleReader.reset_start``), as in a bake
        pole_bones = {b for p in self.poles for b in p.chain}
        self.unpoled = np.array([k for k, b in enumerate(model.free) if b not in pole_bones])
        self.stretched = limits.stretch_bones(model)
        self.warnings = model.warnings
        self.goal_names = [g.bone for g in model.goals]
        self.n_goals = len(model.goals)
        self.rotation_goals = np.array([g.rotation_weight > 0 for g in model.goals], dtype=bool)
        self._reach_setup(model.goals)
        # the last solve's input and output (skip updates that change nothing; warm start)
        self.last_input: tuple[Array, Array] | None = None
        self.last_rotations: Array | None = None  # (K, 3, 3) free bones, float64
        self.last_frame: int | None = None
        # the chain bones' rotations as last set by animation or by hand (not by us)
        self.held: Array | None = None

    def _reach_setup(self, goals: list[Any]) -> None:
        """For each goal: its chain's top bone and the chain's full length (model units), for
        reachability: distance from that bone's head to the target versus the length."""
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
        if rest_key(ob) != self.rest_key:
            return False
        return bool(ik_key(ob, self.free_names, self.names) == self.ik_key)

    # -- the start pose --------------------------------------------------------------------
    def _inputs(self, goals: Goals, pose: Pose) -> tuple[Array, Array]:
        """What a solve reads: the goals (exact) and the fixed bones' local transforms."""
        base = np.eye(4) if goals.base is None else goals.base
        exact = [np.ravel(goals.position), np.ravel(base)]
        if goals.rotation is not None:
            exact.append(np.ravel(goals.rotation))
        fixed = [np.ravel(pose.rotations[0, self.fixed]), np.ravel(pose.locations[0, self.fixed])]
        return np.concatenate(exact), np.concatenate(fixed)

    def unchanged(self, goals: Goals, pose: Pose) -> bool:
        """Nothing this model solves for moved since the last write (our own write included);
        rigs with a free root (move_root) are always solved."""
        if self.last_input is None or self.last_rotations is None or self.model.root >= 0:
            return False
        exact, fixed = self._inputs(goals, pose)
        last_exact, last_fixed = self.last_input
        if exact.shape != last_exact.shape or not (exact == last_exact).all():
            return False
        return _close(fixed, last_fixed) and _close(
            pose.rotations[0, self.free], self.last_rotations
        )

    def start_pose(self, pose: Pose, start: str = "current") -> None:
        """Set the chain bones' start rotations in ``pose`` (read from their channels), in place.

        ``start``: "current" the channels, or the last solve's exact rotations when the channels
        still hold them (a drag: small target moves give small pose changes); "animated" (a frame
        change) the animated pose: a bone whose channels hold our last write (not animated)
        starts from the value it had before live solving wrote it (``held``), any other from its
        channels; "previous" the last solve's rotations, except for bones whose channels
        animation (or a hand) set since (keyed chain bones follow their keys). Chains with a pole
        then start from rest, as in a bake."""
        free_rot = pose.rotations[0, self.free]
        if self.last_rotations is None:
            ours = np.zeros(len(self.free), dtype=bool)
        else:
            ours = np.abs(free_rot - self.last_rotations).max(axis=(1, 2)) <= 1e-5
        if self.held is None:
            self.held = free_rot.copy()
        else:  # channels set by animation or by hand since our last write: the new hold
            self.held[~ours] = free_rot[~ours]
        if start == "animated":
            pose.rotations[0, self.free] = self.held
        elif self.last_rotations is not None and start == "previous":
            # bones that animation (or a hand) set since our write follow it
            pose.rotations[0, self.free] = np.where(
                ours[:, None, None], self.last_rotations, self.held
            )
        elif self.last_rotations is not None and ours.all():
            pose.rotations[0, self.free] = self.last_rotations

    def reachable(self, goals: Goals, pose: Pose, met: NDArray[np.bool_]) -> NDArray[np.bool_]:
        """Each goal's target within its chain's reach: met, or the distance from the head of
        the chain's top bone (which the chain does not move) to the target, in model space, at
        most the chain's length (forward kinematics only when a goal is not met)."""
        if met.all():
            return met
        top = self.skeleton.forward(pose)[0, self.chain_top, :3, 3]
        base = np.asarray(goals.base, dtype=float).reshape(-1, 4, 4)[0]
        inv = np.array(Matrix(base.tolist()).inverted_safe())  # one 4x4: mathutils, not LAPACK
        world = np.asarray(goals.position, dtype=float)[0, : self.n_goals]
        local = world @ inv[:3, :3].T + inv[:3, 3]
        distance = np.sqrt(np.einsum("ei,ei->e", local - top, local - top))
        return np.asarray(met | (distance <= self.reach * (1.0 + 1e-6) + 1e-9))

    # -- solving ---------------------------------------------------------------------------
    def solve(
        self,
        ob: Any,
        *,
        force: bool = False,
        start: str = "current",
        frame: int | None = None,
        depsgraph: Any = None,
    ) -> LiveResult | None:
        """Read the frame (as ``depsgraph`` evaluated it, when given) and solve it from
        ``start`` (see ``start_pose``; "frame": a frame change, see ``FRAME_START``), as a bake
        does; nothing is written. The result (write time 0) and the start pose; None when
        nothing moved since the last update (unless ``force``). Raises IKError, RigError."""
        t0 = time.perf_counter()
        neighbour = self._neighbour(frame) if start == "frame" else None
        first = "animated" if start == "frame" else start
        if start == "frame" and FRAME_START == "previous" and neighbour is not None:
            first = "previous"

        def begin(data: rig.FrameData, goals: Goals) -> None:
            if not force and self.unchanged(goals, data.pose):
                raise Unchanged
            self.start_pose(data.pose, first)

        self._refresh(ob)
        reader = poles.PoleReader(ob, self.poles)  # its reads are this update's
        hooks = LiveHooks(self.solver, begin, depsgraph)
        try:
            data, goals, result, t1 = solve_frames(
                ob,
                Prepared(self.model, reader),
                [0 if frame is None else frame],
                _no_evaluation,
                self.settings,
                live=hooks,
            )
        except Unchanged:
            return None
        candidates, met = 1, self._met(result)
        other = None
        if first == "animated" and neighbour is not None and FRAME_START == "hybrid":
            other = self._from_neighbour(goals, data.pose, result, neighbour)
        elif first == "previous" and not met.all():
            other = self._from_animated(goals, data.pose, result, met)
        if other is not None:
            candidates, result, met = 2, other, self._met(other)
        t2 = time.perf_counter()
        reachable = self.reachable(goals, data.pose, met)
        return LiveResult(
            result,
            self.goal_names,
            reachable,
            t1 - t0,
            t2 - t1,
            0.0,
            0,
            candidates,
            goals,
            data.pose,
            frame,
            None if data.error_scale is None else data.error_scale[0, : self.n_goals],
        )

    def _refresh(self, ob: Any) -> None:
        """Point the model's goals and poles at ``ob``'s goal items and pole objects of now
        (an undo or a file load since the last update replaced the old ones)."""
        goals = [g for _, g in rig.enabled_goals(ob)]
        if len(goals) != self.n_goals:
            raise RigError("the goals changed while solving")
        self.model.goals = goals
        for p in self.poles:
            p.goal, p.target = goals[p.goal_index], goals[p.goal_index].pole_target

    def _neighbour(self, frame: int | None) -> Array | None:
        """The last solution when it was solved at a frame next to ``frame``."""
        if frame is None or self.last_frame is None or abs(frame - self.last_frame) != 1:
            return None
        return self.last_rotations

    def _met(self, result: SolveResult) -> NDArray[np.bool_]:
        st, e = self.settings, self.n_goals
        met = result.position_error[0, :e] <= st.tolerance
        rot_met = result.rotation_error[0, :e] <= st.rotation_tolerance
        return np.asarray(met & (~self.rotation_goals | rot_met))

    def _from_animated(
        self, goals: Goals, start: Pose, result: SolveResult, met: NDArray[np.bool_]
    ) -> SolveResult | None:
        """A frame change solved from the neighbouring frame's solution left a goal within
        reach unmet: solve from the animated pose too and return that when it meets more goals
        (else None), so a reachable goal is met as a jump to the frame meets it."""
        if not (self.reachable(goals, start, met) & ~met).any() or self.held is None:
            return None
        pose = start.copy()
        pose.rotations[0, self.free[self.unpoled]] = self.held[self.unpoled]
        other = self.solver.solve(goals, pose=pose)
        return other if self._met(other).sum() > met.sum() else None

    def _from_neighbour(
        self, goals: Goals, start: Pose, result: SolveResult, neighbour: Array
    ) -> SolveResult | None:
        """A frame change solved from the animated pose turned a joint more than FLIP_ANGLE
        from the neighbouring frame's solution: solve from that solution too and return it
        when it meets every goal the first met and stays closer (else None)."""
        jump = joint_angles(result.pose.rotations[0, self.free], neighbour)
        if jump.max(initial=0.0) <= FLIP_ANGLE or len(self.unpoled) == 0:
            return None
        if self.model.root >= 0 and self.poles:  # poles following the root: not a candidate
            return None
        pose = start.copy()
        moved = self.free[self.unpoled]
        pose.rotations[0, moved] = neighbour[self.unpoled]
        other = self.solver.solve(goals, pose=pose)
        if not (self._met(other) | ~self._met(result)).all():
            return None
        if joint_angles(other.pose.rotations[0, self.free], neighbour).max() >= jump.max():
            return None
        return other

    # -- writing ---------------------------------------------------------------------------
    def pose_channels(self, ob: Any, result: SolveResult) -> list[write.Channel]:
        """The channels a solve sets (a bake keys the same): the chain bones' rotations in
        their rotation modes next to their current values (quaternions in the current
        hemisphere, Euler angles compatible with the current ones), the stretched bones' scale
        and the free root's location (move_root). Raises RigError on NaN."""
        model = self.model
        rotations = result.pose.rotations[:, self.free]
        modes = write.rotation_modes(ob, self.free_names)  # (read once for both)
        seeds = write.current_rotations(ob, self.free_names, self.pose_at, modes)
        channels = write.rotation_channels(ob, self.free_names, rotations, seeds, modes)
        if self.stretched:
            channels += limits.stretch_channels(ob, model, result.pose.stretch[:, self.stretched])
        if model.root >= 0:
            channels += full_body.root_channels(
                model.names[model.root], result.pose.locations[:, model.root]
            )
        if channels and not np.isfinite(np.concatenate([c.values for c in channels], 1)).all():
            raise RigError("solver: the result contains NaN or inf; nothing was written")
        return channels

    def write(self, ob: Any, live: LiveResult) -> None:
        """Set the channels of a ``solve`` (``pose_channels``) and remember it: the next
        update that reads the same warm-starts from it or is skipped."""
        t0 = time.perf_counter()
        write.set_pose_channels(ob, self.pose_channels(ob, live.result), index=self.pose_at)
        rotations = live.result.pose.rotations[0, self.free]
        if live.goals is not None and live.start is not None:
            self.last_input = self._inputs(live.goals, live.start)
        self.last_rotations = rotations
        self.last_frame = live.frame
        live.write_time = time.perf_counter() - t0

    def key_pose(self, ob: Any, frame: int) -> int:
        """Key at ``frame`` every channel an update writes (the chain bones' rotations; with
        IK stretch their scale, with move_root the root's location) as they are now; returns
        the keys written. Live solving keys once when a drag ends, with this."""
        model = self.model
        modes = write.rotation_modes(ob, self.free_names)
        channels = [
            (n, write.rotation_attr(m)) for n, m in zip(self.free_names, modes, strict=True)
        ]
        channels += [(model.names[s.bone], "scale") for s in model.scaled]
        if model.root >= 0:
            channels.append((model.names[model.root], "location"))
        keys = 0
        for name, attr in channels:
            pb = ob.pose.bones[name]
            pb.keyframe_insert(attr, frame=frame, group=name)
            keys += len(getattr(pb, attr))
        return keys

    def update(
        self,
        ob: Any,
        *,
        force: bool = False,
        start: str = "current",
        frame: int | None = None,
        depsgraph: Any = None,
    ) -> LiveResult | None:
        """``solve`` and ``write``: None when nothing moved since the last update (unless
        ``force``)."""
        live = self.solve(ob, force=force, start=start, frame=frame, depsgraph=depsgraph)
        if live is not None:
            self.write(ob, live)
        return live
