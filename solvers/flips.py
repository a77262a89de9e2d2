"""Flip-free bakes: re-solve the frames where joints jump, from their solved neighbours.

In converge mode every frame is solved from its own start pose (the rest or read pose), so a
range equals its frames solved one by one. Where a redundant chain has several poses that meet
its goals, two neighbouring frames can land on different ones (an elbow or a spine bending the
other way, a tentacle straightening with a kink at its root, a compromise between conflicting
goals that slides): a joint turns by tens of degrees between frames while the targets move a
little. ``repair`` removes such flips after the batched solve:

1. Each IK tree's joint changes between consecutive frames are measured (the angle of
   ``R_f^T R_{f+1}`` of each bone the tree moves). A step is a *jump* when a bone turns by more
   than ``Settings.flip_angle``.
2. Round after round, the two frames of every jump are solved again, batched in one ``solve``
   call: frame f+1 from frame f's chosen pose, frame f from frame f+1's (a solved neighbour is a
   start on the branch the animation is on). Each such solve is a *candidate* for its frame;
   the frame's own solve is candidate 0.
3. A candidate is *admissible* when it is as good as the frame's own solve for each goal of the
   tree: a goal the own solve met stays within ``tolerance``, one it did not meet ends no
   farther off than the own solve's error plus ``tolerance / 10`` (rotation errors alike, with
   ``rotation_tolerance``). So no goal ends worse: neither the rms error nor the share of goals
   met can get worse by the repair.
4. Per tree, a shortest path over the frames (Viterbi) picks one admissible candidate a frame,
   minimising the number of bone jumps over ``flip_angle``, then the summed joint change (a tie
   break, 1e-3 per radian), plus 1e-9 per frame taken from a neighbour (so a frame keeps its own
   solve unless a neighbour's start is smoother). Frames with only their own candidate split the
   path into independent segments; only the segments with candidates are walked.
5. The next round re-solves the jumps left on the chosen path; a candidate already solved from
   the same start is not solved again. ``ROUNDS`` rounds at most (a branch that a
   neighbour's start carries across a run of frames advances one frame a round, from both ends).

What "a range equals its frames solved one by one" means with the repair: a frame keeps its own
solve (``solve`` of that frame alone from its own start, as before) unless it was part of a jump;
then its pose, errors, iterations and reason are ``solve`` of that frame alone (the same settings)
from ``FlipRepair.start[f]``, the pose of a neighbouring frame that a solve of that frame
produced (tests/solvers/test_flips.py checks every frame of a repaired range against its solve
alone from that start, to 1e-9). ``flip_angle = 0`` switches the repair off. Track mode already
starts each frame from the last, and is not repaired. Pure numpy; deterministic (the same input
gives bit-identical output: fixed order, no randomness, ties to the lowest index).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from .errors import SettingsError
from .goals import Goals, PreparedGoals, prepare_goals
from .skeleton import Pose, Skeleton
from .solve import Settings, SolveResult, goal_status
from .solve import solve as solve_range

Array = NDArray[np.float64]

SMOOTH_WEIGHT = 1e-3
"""Cost of one radian of joint change between frames, against 1 for a jump over flip_angle."""
ROUNDS = 8
"""Most rounds of re-solves (each one batched ``solve`` call of the jumps' frames)."""
NEIGHBOUR_COST = 1e-9
"""Cost of taking a frame's pose from a neighbour's start rather than its own."""


@dataclass
class FlipRepair:
    """What ``repair`` did: jumps (bone steps over ``flip_angle``) before and after, solve
    rounds, frames solved again, frames changed, and ``start``: the pose each frame's final
    result was solved from (its own start pose, or a solved neighbour's)."""

    start: Pose
    before: int = 0
    after: int = 0
    rounds: int = 0
    solved: int = 0
    changed: NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))


def joint_steps(rotations: Array) -> Array:
    """(F-1, B) the angle (radians) each bone turns between consecutive frames of (F, B, 3, 3)."""
    rel = np.swapaxes(rotations[:-1], -1, -2) @ rotations[1:]
    cos = (np.trace(rel, axis1=-2, axis2=-1) - 1.0) / 2.0
    return np.asarray(np.arccos(np.clip(cos, -1.0, 1.0)))


def count_jumps(rotations: Array, angle: float) -> int:
    """Bone steps of (F, B, 3, 3) rotations turning by more than ``angle`` radians."""
    return int(np.sum(joint_steps(rotations) > angle))


def take_frames(goals: Goals, index: NDArray[np.intp]) -> Goals:
    """The goals of the frames ``index`` (the per-effector settings are kept)."""
    position = np.asarray(goals.position, dtype=float)
    rotation = None if goals.rotation is None else np.asarray(goals.rotation, dtype=float)[index]
    base = goals.base
    if base is not None and np.ndim(base) == 3:
        base = np.asarray(base, dtype=float)[index]
    return replace(goals, position=position[index], rotation=rotation, base=base)


def check(settings: Settings) -> None:
    angle = settings.flip_angle
    if not (math.isfinite(angle) and angle >= 0.0):
        raise SettingsError(f"flip_angle must be finite and >= 0, got {angle}")


def solve(
    skeleton: Skeleton, goals: Goals, settings: Settings, pose: Pose | None = None
) -> SolveResult:
    """``solvers.solve`` followed, in converge mode over several frames, by ``repair``."""
    result = solve_range(skeleton, goals, settings, pose)
    if settings.mode != "converge" or result.pose.frames < 3:
        return result
    start = (pose or Pose.rest(skeleton.n_bones)).broadcast(result.pose.frames)
    return repair(skeleton, goals, settings, start, result)[0]


class _Tree:
    """One IK tree's candidates: per candidate its frame, pose of the tree's bones, errors."""

    def __init__(
        self, index: int, tree: NDArray[np.intp], bones: NDArray[np.intp], res: SolveResult
    ) -> None:
        frames = res.pose.frames
        self.index, self.tree, self.bones = index, tree, bones
        self.frame = np.arange(frames)
        self.source = np.full(frames, -1)  # the candidate whose pose it started from (-1: own)
        self.way = np.zeros(frames, dtype=np.intp)  # +1: from the frame before, -1: after
        self.rot = res.pose.rotations[:, bones]
        self.loc = res.pose.locations[:, bones]
        self.stretch = res.pose.stretch[:, bones]
        self.pos = res.position_error[:, tree]
        self.ori = res.rotation_error[:, tree]
        self.reason = self._reason(res)
        self.iterations = np.asarray(res.iterations)
        self.chosen = np.arange(frames)  # per frame, the chosen candidate
        self.tried: set[tuple[int, int]] = set()  # (frame, source candidate) solved

    def add(
        self,
        frame: NDArray[np.intp],
        source: NDArray[np.intp],
        way: NDArray[np.intp],
        res: SolveResult,
    ) -> None:
        self.frame = np.concatenate([self.frame, frame])
        self.source = np.concatenate([self.source, source])
        self.way = np.concatenate([self.way, way])
        self.rot = np.concatenate([self.rot, res.pose.rotations[:, self.bones]])
        self.loc = np.concatenate([self.loc, res.pose.locations[:, self.bones]])
        self.stretch = np.concatenate([self.stretch, res.pose.stretch[:, self.bones]])
        self.pos = np.concatenate([self.pos, res.position_error[:, self.tree]])
        self.ori = np.concatenate([self.ori, res.rotation_error[:, self.tree]])
        self.reason = np.concatenate([self.reason, self._reason(res)])
        self.iterations = np.concatenate([self.iterations, res.iterations])

    def _reason(self, res: SolveResult) -> NDArray[np.str_]:
        if res.tree_reason is None:
            return np.asarray(res.reason)
        return np.asarray(res.tree_reason[self.index])

    def jumps_between(self, a: int, b: int, angle: float) -> bool:
        return bool(np.any(joint_steps(self.rot[[a, b]]) > angle))

    def admissible(
        self, settings: Settings, met_tol: tuple[NDArray[np.bool_], NDArray[np.bool_]]
    ) -> NDArray[np.bool_]:
        """Per candidate: as good as its frame's own solve for each of this tree's goals: a goal
        the own solve met stays met, one it did not meet ends no farther off (+ tolerance / 10;
        rotation errors alike), so neither the rms error nor the share of met goals can worsen."""
        f = self.frame
        free_pos, free_rot = met_tol[0][self.tree], met_tol[1][self.tree]
        tol, rtol = settings.tolerance, settings.rotation_tolerance
        ok_pos = free_pos | (self.pos <= np.maximum(self.pos[f] + 0.1 * tol, tol))
        ok_rot = free_rot | (self.ori <= np.maximum(self.ori[f] + 0.1 * rtol, rtol))
        keep = np.all(ok_pos, axis=1) & np.all(ok_rot, axis=1)
        return np.asarray(keep | (self.source < 0))

    def jumps(self, angle: float) -> Array:
        """(F-1,) bones over ``angle`` per step of the chosen path."""
        return np.asarray(np.sum(joint_steps(self.rot[self.chosen]) > angle, axis=1))


def repair(
    skeleton: Skeleton, goals: Goals, settings: Settings, start: Pose, result: SolveResult
) -> tuple[SolveResult, FlipRepair]:
    """``result`` (``solve`` of every frame from ``start``, converge mode) with the frames where
    joints jump re-solved from their neighbours; see the module docstring."""
    check(settings)
    frames = result.pose.frames
    angle = settings.flip_angle
    report = FlipRepair(start.copy(), changed=np.zeros(frames, dtype=bool))
    trees = result.trees or [np.arange(skeleton.n_effectors)]
    if angle <= 0.0 or frames < 2 or goals.balance is not None:
        return result, report
    moved = [np.unique(skeleton.dof_bone[skeleton.dof_moves[t].any(axis=0)]) for t in trees]
    if sum(len(b) for b in moved) != len(np.unique(np.concatenate(moved))):
        return result, report  # trees sharing a bone (not split by DOF): left as solved
    g = prepare_goals(goals, skeleton.n_effectors)
    met_tol = (g.w_pos <= 0) | g.is_aim, (g.w_rot <= 0) & ~(g.is_aim & (g.w_pos > 0))
    state = [_Tree(i, t, b, result) for i, (t, b) in enumerate(zip(trees, moved, strict=True))]
    report.before = sum(int(s.jumps(angle).sum()) for s in state)
    fresh: list[NDArray[np.intp]] = [np.zeros(0, dtype=np.intp) for _ in state]
    for _ in range(ROUNDS):
        # per tree, (frame, source candidate, direction) to solve: both frames of each jump
        # left on the chosen path from the other's pose, and the waves that last round's
        # admissible candidates carry on (one frame further, while they still jump from the
        # chosen pose next to them)
        want: list[list[tuple[int, int, int]]] = []
        for s in state:
            asks: list[tuple[int, int, int]] = []
            for f in np.flatnonzero(s.jumps(angle)):
                asks += [(f + 1, s.chosen[f], 1), (f, s.chosen[f + 1], -1)]
            keep = s.admissible(settings, met_tol)
            for c in fresh[state.index(s)]:
                n = s.frame[c] + s.way[c]
                if keep[c] and 0 <= n < frames and s.jumps_between(c, s.chosen[n], angle):
                    asks.append((n, c, s.way[c]))
            mine = []
            for frame, c, way in asks:
                if (int(frame), int(c)) not in s.tried:
                    s.tried.add((int(frame), int(c)))
                    mine.append((int(frame), int(c), int(way)))
            want.append(sorted(mine))
        if not any(want):
            break
        report.rounds += 1
        # batch elements (frame, k): each tree's k-th request at that frame starts from its
        # source; a tree without one starts from its chosen (solved) pose and is not kept
        slots: dict[tuple[int, int], dict[int, tuple[int, int]]] = {}
        for i, asks in enumerate(want):
            count: dict[int, int] = {}
            for frame, c, way in asks:
                k = count.get(frame, 0)
                count[frame] = k + 1
                slots.setdefault((frame, k), {})[i] = (c, way)
        keys = sorted(slots)
        index = np.array([f for f, _ in keys], dtype=np.intp)
        begin = start.take(index)
        for r, key in enumerate(keys):
            for i, s in enumerate(state):
                c = slots[key][i][0] if i in slots[key] else s.chosen[key[0]]
                begin.rotations[r, s.bones] = s.rot[c]
                begin.locations[r, s.bones] = s.loc[c]
                begin.stretch[r, s.bones] = s.stretch[c]
        res = solve_range(skeleton, take_frames(goals, index), settings, begin)
        report.solved += len(keys)
        for i, s in enumerate(state):
            rows = np.array([r for r, key in enumerate(keys) if i in slots[key]], dtype=np.intp)
            fresh[i] = len(s.frame) + np.arange(rows.size)
            if rows.size:
                src = np.array([slots[keys[r]][i] for r in rows], dtype=np.intp)
                s.add(index[rows], src[:, 0], src[:, 1], take_result(res, rows))
        for s in state:
            _choose(s, frames, angle, settings, met_tol)
    report.after = sum(int(s.jumps(angle).sum()) for s in state)
    return _apply(skeleton, g, settings, start, result, state, report), report


def take_result(res: SolveResult, index: NDArray[np.intp]) -> SolveResult:
    """The frames ``index`` of a result."""
    return replace(
        res,
        pose=res.pose.take(index),
        position_error=res.position_error[index],
        rotation_error=res.rotation_error[index],
        iterations=np.asarray(res.iterations)[index],
        reason=np.asarray(res.reason)[index],
        history=np.asarray(res.history)[:, index],
        tree_reason=None if res.tree_reason is None else res.tree_reason[:, index],
        goal_status=None if res.goal_status is None else res.goal_status[index],
        balance_distance=None if res.balance_distance is None else res.balance_distance[index],
    )


def _choose(
    s: _Tree,
    frames: int,
    angle: float,
    settings: Settings,
    met_tol: tuple[NDArray[np.bool_], NDArray[np.bool_]],
) -> None:
    """The chosen candidate per frame: the cheapest admissible path (Viterbi), segment by
    segment of frames that have more than their own candidate."""
    own = s.source < 0
    f = s.frame
    keep = s.admissible(settings, met_tol)
    options: list[NDArray[np.intp]] = [np.array([fr]) for fr in range(frames)]
    extra = np.flatnonzero(keep & ~own)
    for c in extra:  # in candidate order: deterministic
        options[int(f[c])] = np.append(options[int(f[c])], c)
    many = np.array([len(o) > 1 for o in options])
    chosen = np.arange(frames)
    # segments of frames with several options, with one frame of context either side
    starts = np.flatnonzero(many & ~np.concatenate([[False], many[:-1]]))
    for a in starts:
        b = a
        while b + 1 < frames and many[b + 1]:
            b += 1
        lo, hi = max(a - 1, 0), min(b + 1, frames - 1)
        chosen[lo : hi + 1] = _viterbi(s, options[lo : hi + 1], angle)
    s.chosen = chosen


def _viterbi(s: _Tree, options: list[NDArray[np.intp]], angle: float) -> NDArray[np.intp]:
    """The cheapest sequence of candidates, one per frame from ``options``."""
    node = [np.where(s.source[o] >= 0, NEIGHBOUR_COST, 0.0) for o in options]
    cost = node[0]
    back: list[NDArray[np.intp]] = []
    for prev, cur, n in zip(options[:-1], options[1:], node[1:], strict=True):
        rel = np.swapaxes(s.rot[prev][:, None], -1, -2) @ s.rot[cur][None]  # (P, C, B, 3, 3)
        cos = (np.trace(rel, axis1=-2, axis2=-1) - 1.0) / 2.0
        step = np.arccos(np.clip(cos, -1.0, 1.0))
        total = cost[:, None] + np.sum(step > angle, axis=2) + SMOOTH_WEIGHT * step.sum(axis=2)
        best = np.argmin(total, axis=0)
        back.append(best)
        cost = total[best, np.arange(len(cur))] + n
    path = [int(np.argmin(cost))]
    for best in reversed(back):
        path.append(int(best[path[-1]]))
    path.reverse()
    return np.array([o[k] for o, k in zip(options, path, strict=True)], dtype=np.intp)


def _apply(
    skeleton: Skeleton,
    g: PreparedGoals,
    settings: Settings,
    start: Pose,
    result: SolveResult,
    state: list[_Tree],
    report: FlipRepair,
) -> SolveResult:
    """``result`` with each tree's chosen candidates written in; ``report.start`` the starts."""
    pose = result.pose.copy()
    pos, rot = result.position_error.copy(), result.rotation_error.copy()
    iterations = np.array(result.iterations, copy=True)
    reasons = np.stack([s.reason[: pose.frames] for s in state])  # (T, F)
    for s in state:
        frames = np.flatnonzero(s.chosen != np.arange(pose.frames))
        if frames.size == 0:
            continue
        c = s.chosen[frames]
        at = np.ix_(frames, s.bones)
        pose.rotations[at], pose.locations[at], pose.stretch[at] = s.rot[c], s.loc[c], s.stretch[c]
        src = s.source[c]
        report.start.rotations[at] = s.rot[src]
        report.start.locations[at] = s.loc[src]
        report.start.stretch[at] = s.stretch[src]
        pos[np.ix_(frames, s.tree)], rot[np.ix_(frames, s.tree)] = s.pos[c], s.ori[c]
        reasons[s.index, frames] = s.reason[c]
        iterations[frames] = np.maximum(iterations[frames], s.iterations[c])
        report.changed[frames] = True
    first = np.argmax(reasons != "converged", axis=0)
    out = replace(
        result,
        pose=pose,
        position_error=pos,
        rotation_error=rot,
        iterations=iterations,
        reason=reasons[first, np.arange(pose.frames)],
    )
    if result.tree_reason is not None:
        out.tree_reason = reasons
    out.goal_status = goal_status(skeleton, g, out, settings)
    return out


def join_goals(parts: list[Goals]) -> Goals:
    """The goals of consecutive ranges of frames as one range (the per-effector settings of the
    first; the parts are chunks of one bake, which share them)."""
    first = parts[0]
    frames = [
        np.asarray(p.position, dtype=float).reshape(-1, *np.shape(first.position)[-2:])
        for p in parts
    ]
    rotation = None
    if first.rotation is not None:
        rotation = np.concatenate(
            [
                np.asarray(p.rotation, dtype=float).reshape(len(x), -1, 3, 3)
                for p, x in zip(parts, frames, strict=True)
            ]
        )
    base = first.base
    if any(p.base is not None and np.ndim(p.base) == 3 for p in parts):
        base = np.concatenate(
            [
                np.broadcast_to(np.asarray(p.base, dtype=float), (len(x), 4, 4))
                for p, x in zip(parts, frames, strict=True)
            ]
        )
    return replace(first, position=np.concatenate(frames), rotation=rotation, base=base)


def join_poses(parts: list[Pose]) -> Pose:
    """Poses of consecutive ranges of frames as one."""
    return Pose(
        np.concatenate([p.rotations for p in parts]),
        np.concatenate([p.locations for p in parts]),
        np.concatenate([p.stretch for p in parts]),
    )


def join_results(parts: list[SolveResult]) -> SolveResult:
    """Converge-mode results of consecutive ranges of frames as one (what ``repair`` reads)."""
    first = parts[0]
    tree_reason = None
    if first.tree_reason is not None:
        tree_reason = np.concatenate([np.asarray(p.tree_reason) for p in parts], axis=1)
    return replace(
        first,
        pose=join_poses([p.pose for p in parts]),
        position_error=np.concatenate([p.position_error for p in parts]),
        rotation_error=np.concatenate([p.rotation_error for p in parts]),
        iterations=np.concatenate([np.asarray(p.iterations) for p in parts]),
        reason=np.concatenate([np.asarray(p.reason) for p in parts]),
        history=_join_history([np.asarray(p.history) for p in parts]),
        elapsed=sum(p.elapsed for p in parts),
        tree_reason=tree_reason,
        goal_status=None,
    )


def _join_history(parts: list[Array]) -> Array:
    """(K + 1, F) histories of different lengths, each held at its last row."""
    k = max(h.shape[0] for h in parts)
    return np.concatenate([np.concatenate([h, np.repeat(h[-1:], k - len(h), 0)]) for h in parts], 1)
