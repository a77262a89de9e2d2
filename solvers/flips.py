"""Flip-free bakes: re-solve the frames where joints jump, from their solved neighbours (and
the frames stuck off a goal in reach, from poses a few frames off).

In converge mode every frame is solved from its own start pose (the rest or read pose), so a
range equals its frames solved one by one. Where a redundant chain has several poses that meet
its goals, two neighbouring frames can land on different ones (an elbow or a spine bending the
other way, a tentacle straightening with a kink at its root, a compromise between conflicting
goals that slides): a joint turns by tens of degrees between frames while the targets move a
little. ``repair`` removes such flips after the batched solve:

1. Each IK tree's joint changes between consecutive frames are measured (the angle of
   ``R_f^T R_{f+1}`` of each bone the tree moves). A step is a *jump* when a bone turns by more
   than ``Settings.flip_angle``.
2. The two frames of every jump are solved again, frame f+1 from frame f's chosen pose and frame
   f from frame f+1's (a solved neighbour is a start on the branch the animation is on). Each
   such solve is a *candidate* for its frame; the frame's own solve is candidate 0. A candidate
   that is admissible (3) (or as good for the tree and still flipping, ``FLIP_ANGLE``) and
   still jumps from the next frame's chosen pose starts a *wave*: the
   next ``WAVE`` frames in its direction are solved from its pose, and so on from the farthest
   of them, round after round, until the branch it carries meets the frames' own solves (no
   jump) or the range ends. Each round is one batched ``solve`` call per IK tree with requests,
   on the tree's own skeleton (``Skeleton.subtree``; trees are independent).
3. A candidate is *admissible* when it is as good as the frame's own solve for each goal of the
   tree: a goal the own solve met stays within ``tolerance``, one it did not meet ends no
   farther off than the own solve's error plus ``tolerance / 10`` (rotation errors alike, with
   ``rotation_tolerance``). The path (4) judges the tree as a whole (``_Tree.as_good``): a
   goal the own solve met stays met, but the goals it did not meet are taken together, by
   the solve's own measure (the root of their rows' weighted squared errors, rotations in
   radians) within ``CHOICE_SHARE`` (1 %) of the own solve's (or tolerance / 10 a goal;
   waves start from the first kind, and from flips as good for the tree without the 1 %).
   Where goals conflict, a solve from a neighbour's pose ends at another compromise, nearer
   one goal and farther from another, as good for the tree. So no met goal ends unmet and
   the unmet ones of a tree end no more than 1 % farther off together: the share of goals
   met cannot get worse by the repair, the rms error by about 1 % at most (a carried tree's
   second pass, 7, allows 1 % of what the first left).
4. Per tree, a shortest path over the frames (Viterbi) picks one candidate a frame (as good
   for the tree as its own solve, within ``CHOICE_SHARE``), minimising the number of bone
   jumps over ``flip_angle``, each weighed up by its size beyond that angle
   (``OVER_WEIGHT``: a half-turn costs as much as about 25 jumps of 20 degrees), then the
   summed joint change (a tie break, 1e-3 per radian), plus 1e-9 per frame taken from a
   neighbour (so a frame keeps its own solve unless a neighbour's start is smoother). Frames
   with only their own candidate split the path into independent segments; only the segments
   with candidates are walked.
5. When no wave is left, the path is chosen again (4) and the next pass re-solves the jumps
   left on it; ``PASSES`` passes and ``ROUNDS`` rounds at most. A candidate already solved from
   the same start is not solved again.
6. Then one pass for the goals the own solves left unmet in reach (``goal_status``
   "conflict"): a solve can stop at a local minimum of its own start while another start meets
   the goal, and where the own solves slide into it smoothly no joint jumps to ask for a
   re-solve (zoo seed 6060's 05, a hand with an orientation goal on a chain of 3: met from
   frame 93 on, 1.5-24 mm off on frames 84-92, where Blender's IK met it from frame 88; frame
   92 solved from frame 84's pose meets it). In each run of such frames, every
   ``REACH_EVERY``-th frame from its first is solved from the chosen poses ``REACH_STARTS``
   frames off; the candidates go the way of the others (admissible ones that jump from the
   pose next to them start waves, 2) and the path (4) weighs, besides the jumps, ``MISS_COST``
   for each goal a candidate leaves unmet, so it takes the poses that meet more goals where
   that costs fewer jumps than it meets goals.
7. A tree and the trees it carries (``solve.tree_carriers``: a hand's chain of 3 on the chest
   of the head's chain; ``solve.carry_groups``) are repaired as one: a candidate solves them
   all (the carried ones from the carrier's new pose, as ``solve`` does), its bones are all of
   theirs and it is admissible only when every goal of them is as good as the frame's own
   solve. Repairing the carrier alone let it pick, among poses as good for its own goals, one
   that left a carried goal out of reach (zoo humanoids: a hand met on 54 % of its samples
   after the repair against 70 % before). Then the carried trees are repaired again on their
   own, on their carriers' repaired poses (as good as that first pass left them).
8. Last, bridges over the jumps left on the chosen path. Where goals leave a chain many
   poses, two branches can each run smoothly over most of the range and meet nowhere: a
   tentacle whose target comes into reach and leaves it again (zoo seed 6868's 03, 33 bones)
   enters reach on the branch of the straight chain and leaves it on another, and its root
   turned 39 degrees in the one frame where the path crossed from one to the other (Blender's
   IK: no step over 10 degrees). Each jump left, from candidate a at frame f to b at f + 1
   turning a bone by s, is bridged both ways over k = ceil(s / (``BRIDGE_SHARE`` flip_angle))
   frames (at most ``BRIDGE``): frame f + i solved from the pose of frame f + i - 1's bridge
   (a for the first) turned 1 / (k - i + 1) of the way toward the chosen pose of frame f + i
   (per bone, along the shortest rotation; locations and stretch linearly), so the last one
   starts at it; and frames f, f - 1, ... alike from b. One batched solve per tree and round
   (k rounds), then the path is chosen again (4) over all the candidates, bridges among them:
   its cost cannot rise. On 33 captured zoo bakes (seeds 5656-6868, every kind, creatures
   too) the jumps left fell from 1,228 to 966 (humanoids 128 -> 99, 106 -> 71, 35 -> 22;
   trees 70 -> 44, 47 -> 27; limbs 0-3 fewer; the tentacle 1 -> 0), the rms error within
   1e-5 of before on every rig (lower on eight), the share of samples within 1e-3 the same
   but on three rigs 0.002-0.003 lower (6262's 15, a humanoid; two trees) and seven trees
   0.001-0.005 higher; the repair took 14.3 s against 11.2 (limbs 43-66 -> 55-89 ms). Every
   jump bridged over 16 frames: 893 jumps left, 18.4 s; ``BRIDGE_SHARE`` 0.25: 928, 16.0 s.
   The solved motion is a little rougher (the trees' samples more than 0.1 degrees off their
   cubic 1-4 points more): a lean bake of zoo seed 6666's two trees keys 3.0x and 4.0x fewer
   than a full one, against 3.2x and 3.9x.

What "a range equals its frames solved one by one" means with the repair: a frame keeps its own
solve (``solve`` of that frame alone from its own start, as before) unless it was part of a jump
or stuck off a goal (6); then its pose, errors, iterations and reason are ``solve`` of that
frame alone (the same settings) from ``FlipRepair.start[f]``, the pose of a nearby frame (its
neighbour, a wave's last frame, or one ``REACH_STARTS`` off) that a solve of that frame
produced, or a bridge's turned pose (8) (tests/solvers/test_flips.py checks every frame of a
repaired range against its solve alone from that start, to 1e-9). ``flip_angle = 0`` switches
the repair off. Track mode already starts each frame from the last, and is not repaired. Pure
numpy; deterministic (the same input gives bit-identical output: fixed order, no randomness,
ties to the lowest index).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from .blas import one_thread
from .errors import SettingsError
from .goals import Goals, PreparedGoals, no_worse, no_worse_together, prepare_goals
from .skeleton import Pose, Skeleton
from .so3 import angle_axis, exp_so3
from .solve import (
    Settings,
    SolveResult,
    carry_groups,
    goal_status,
    goal_status_at,
    ik_trees,
    solve_tree,
    tree_carriers,
)
from .solve import solve as solve_range

Array = NDArray[np.float64]

SMOOTH_WEIGHT = 1e-3
"""Cost of one radian of joint change between frames, against 1 for a jump over flip_angle."""
ROUNDS = 256
"""Most rounds of re-solves (one batched ``solve`` call per IK tree with requests)."""
WAVE = 16
"""Frames a wave advances per round, each solved from the wave's last pose. Where a tree has
several goals, the frames far from their source seldom win: on three captured zoo bakes (7676's
creature 06, 7272's humanoid 10 and tree 14) the re-solves 9-16 frames from their source took
about half of the shared tree's iterations and 1-3 % of them were chosen (a goal alone: 17-26 %
at every distance). On 64 captured bakes (seeds 5656-7777, every kind) waves of 8 and 4 frames
took the repair from 30.0 s to 23.4 and 19.0 s in all, but left 1,980 and 2,026 jumps against
1,959 (5757's humanoid 10: 93 -> 113), and made the limbs slower (more rounds, each a solve
call per tree: six spiders 493 -> 756 ms at 4); 4 frames only in trees of several goals: 18.8
s, 2,025 jumps. Re-solves capped at 100 iterations (60 of them): 27.7 -> 21.3 s, jumps 1,831
-> 1,925."""
FLIP_ANGLE = math.radians(90.0)
"""A wave also carries on from a candidate as good for the tree as the own solve (``as_good``
without its share) that still turns a bone by more than this from the chosen pose next to it
(a flip, not a jump): where goals in conflict leave a flat valley of compromises (two hands
out of reach through one spine, their orientation goals all that holds its twist), the own
solves land anywhere along it and a neighbour's start, a little farther from one goal and as
near for the tree, is refused by ``admissible``; its wave is what keeps the branch. On 26
captured zoo bakes (seeds 4040-4949) the bone steps over 60 degrees went from 61 to 43 (4949's
humanoid 02, hands through the spine with orientation goals: a 140-degree turn of the spine in
one frame gone, 12 to 2; 4848's 00 17 to 8), over 30 degrees 216 to 180, jumps 1,217 to 1,148,
the solve, repair and smoothing 9.3 s to 12.0 (trees 0.34 to 0.59 s, the slowest humanoid 1.80
to 2.67); the rms error the same to 4 digits. From every such candidate, whatever its step
(at 0 degrees): jumps 1,062, steps over 60 degrees 41, 26.6 s; at 60 degrees 1,126, 42, 12.7 s."""
PASSES = 1
"""Passes: re-solve the jumps on the chosen path, carry the waves to their end, choose again
(a second pass removed no further jump on the zoo's rigs and took as long again)."""
OVER_WEIGHT = 3.0
"""Cost of a bone step over flip_angle per squared radian beyond it, on top of the 1 it costs as
a jump: about 0.1 for a step of 20 degrees, 2.3 for 60, 26.4 for a half-turn. Counted alone,
jumps were traded for fewer but larger ones: on 24 captured zoo bakes (seeds 3333, 3434 and
3535) the repair took a tree whose own solves turned a bone by at most 38 degrees between
frames to 44 jumps, four of them over 60 degrees (the largest 179.5); 48 bone steps over 60
degrees in all, where the own solves had 20. With this weight 22 (the largest 141.5 degrees,
where the own solves had 137), jumps 858 -> 938 in all (the own solves 1,587), no more than
Blender's bake on the same 20 of 24 rigs. 1 and 10 per squared radian left 33 and 20 steps
over 60 degrees, with 885 and 990 jumps; 3 per radian (linear) 30."""
BRIDGE = 16
"""The most frames each way a jump left on the chosen path is bridged over (8)."""
BRIDGE_SHARE = 0.5
"""How much of ``flip_angle`` each frame of a bridge carries of the crossing at most (8): a jump
of s radians is bridged over ceil(s / (BRIDGE_SHARE flip_angle)) frames each way (the motion
of the frames themselves takes the rest)."""
NEIGHBOUR_COST = 1e-9
"""Cost of taking a frame's pose from a neighbour's start rather than its own."""
MISS_COST = 1.0
"""Cost of each goal a candidate leaves unmet (position or rotation counted apart), against 1
for a jump (6): a frame's goal met is worth a jump. On 25 captured zoo bakes (seeds 5656-6262,
every kind; at ea7e91d, before priority's (A0)), against the repair without the search of 6:
the goal-frames left unmet 12,045 -> 11,966, the jumps 923 -> 932; the rms error the same but
on 5757's 10 (0.1603 -> 0.1283, a head and hands through the spine), 5858's 05 (0.0898 ->
0.0887) and 6060's 05; 0.5: 11,992 unmet, 935 jumps; 2: 11,919 and 954."""
REACH_STARTS = (-8, 8)
"""Where the frames of a run whose own solves leave a goal unmet in reach are also solved from
(6): the chosen poses this many frames off. On the 25 bakes, +-16: 11,968 goal-frames unmet and
949 jumps (+-8: 11,966 and 932)."""
REACH_EVERY = 16
"""Which frames of such a run are solved from ``REACH_STARTS`` (6): its first and every this
many after it; the waves carry what they find along the run. Every 8th: the same goal-frames
met (11,963) for 57,818 frames solved against 56,233 (52,686 without the search); every
32nd: 11,970 and 55,520."""
CHOICE_SHARE = 0.01
"""How much farther off than the frame's own solve (a share of the root-sum-square of their
errors) the goals that solve did not meet may end, together, in a candidate the path takes (3,
4). Where goals conflict, a solve from a neighbour's pose ends at another compromise, a little
nearer one goal and a little farther from another; held to the own solve's error plus a tenth
of the tolerance, nearly all of them were refused and the joints kept jumping. Judged goal by
goal (each within this share of its own error): on 16 captured zoo bakes (seeds 404, 505 and 1)
the jumps
left on the five humanoids with a shared chest went from 75, 101, 98, 65, 84 to 62, 78, 81, 52,
79 and on four double-Y trees from 94, 46, 80, 62 to 77, 45, 70, 60, with the same solves; the
limbs, spiders and tentacles kept theirs; the rms error and the share of samples within 1e-3
stayed the same to 5 digits or improved. 0.3 % left more jumps, 3 % and 10 % removed hardly
more. Waves (2) carry on only from candidates as good as the own solve (share 0): carried by
the 1 % candidates too, they solved 2-10 times the frames (up to 10 s for 250 frames) for a
few jumps more. Judged for the tree (``_Tree.as_good``) rather than goal by goal, on 80
captured zoo bakes (seeds 3434, 3535, 3636 and 3737, every rig) the jumps left fell from
1,923 to 1,777 (fewer on 19 rigs, more on none: 3636/15, a humanoid of six goals, 73 -> 57;
3737/05, hands with orientation goals, 29 -> 26; trees 50 -> 35, 114 -> 89, 86 -> 71), steps
over 60 degrees 51 -> 40, the same frames solved; the rms error within 1e-5 of before on
every rig (3636/15 0.1013 -> 0.1005), the share of samples within 1e-3 the same but on four
trees (1-3 of 1,000 samples fewer); one goal ended at most 19 mm farther off, its tree's
other goals nearer. Waves carried on from such candidates too took the jumps to 1,544 and
the steps over 60 degrees to 11, but solved 1.6 times the frames in 3.6 times the time (a
tree's repair 9.5 s): they carry on only from flips (``FLIP_ANGLE``)."""


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


def turn_angles(a: Array, b: Array) -> Array:
    """The angles (radians) of R_a^T R_b, rotations (..., 3, 3)."""
    rel = np.swapaxes(a, -1, -2) @ b
    cos = (np.trace(rel, axis1=-2, axis2=-1) - 1.0) / 2.0
    return np.asarray(np.arccos(np.clip(cos, -1.0, 1.0)))


def joint_steps(rotations: Array) -> Array:
    """(F-1, B) the angle (radians) each bone turns between consecutive frames of (F, B, 3, 3)."""
    return turn_angles(rotations[:-1], rotations[1:])


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


def tree_goals(goals: Goals, index: NDArray[np.intp], tree: NDArray[np.intp], n: int) -> Goals:
    """The goals of the frames ``index`` and the effectors ``tree`` (of ``n``): one IK tree's,
    for its own skeleton (``Skeleton.subtree``)."""
    g = take_frames(goals, index)

    def pick(x: object, shape: tuple[int, ...]) -> np.ndarray | None:
        return None if x is None else np.broadcast_to(np.asarray(x), shape)[tree]

    rotation = None if g.rotation is None else np.asarray(g.rotation)[:, tree]
    return replace(
        g,
        position=np.asarray(g.position)[:, tree],
        rotation=rotation,
        position_weight=pick(g.position_weight, (n,)),
        rotation_weight=pick(g.rotation_weight, (n,)),
        secondary=pick(g.secondary, (n,)),
        aim=pick(g.aim, (n, 3)),
        support=pick(g.support, (n,)),
    )


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
    """One repair unit's candidates (an IK tree with the trees it carries): per candidate its
    frame, pose of the unit's bones, errors, and reason per tree (``rows``: the trees of the
    result it holds)."""

    def __init__(
        self,
        index: int,
        tree: NDArray[np.intp],
        bones: NDArray[np.intp],
        res: SolveResult,
        rows: list[int],
        weight: tuple[Array, Array],
    ) -> None:
        frames = res.pose.frames
        self.index, self.tree, self.bones, self.rows = index, tree, bones, rows
        self.weight = weight  # (goals of the unit,) their position and rotation weights
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
        status = res.goal_status
        # frames where the own solve leaves a goal of the unit unmet in reach
        self.conflict = (
            np.zeros(frames, dtype=bool)
            if status is None
            else np.any(np.asarray(status)[:, tree] == "conflict", axis=1)
        )
        self.tried: set[tuple[int, int]] = set()  # (frame, source candidate) solved
        # candidates solved from a pose of their own (bridges, 8): that pose
        self.starts: dict[int, tuple[Array, Array, Array]] = {}

    def add(
        self,
        frame: NDArray[np.intp],
        source: NDArray[np.intp],
        way: NDArray[np.intp],
        res: SolveResult,
        at: NDArray[np.intp],
        reasons: NDArray[np.str_],
    ) -> None:
        """Candidates solved on the unit's own skeleton (``at``: the unit's bones in it;
        ``reasons``: (candidates, trees of the unit))."""
        self.frame = np.concatenate([self.frame, frame])
        self.source = np.concatenate([self.source, source])
        self.way = np.concatenate([self.way, way])
        self.rot = np.concatenate([self.rot, res.pose.rotations[:, at]])
        self.loc = np.concatenate([self.loc, res.pose.locations[:, at]])
        self.stretch = np.concatenate([self.stretch, res.pose.stretch[:, at]])
        self.pos = np.concatenate([self.pos, res.position_error])
        self.ori = np.concatenate([self.ori, res.rotation_error])
        self.reason = np.concatenate([self.reason, reasons])
        self.iterations = np.concatenate([self.iterations, res.iterations])

    def _reason(self, res: SolveResult) -> NDArray[np.str_]:
        """(F, trees of the unit) the frames' reasons."""
        if res.tree_reason is None:
            return np.asarray(res.reason)[:, None]
        return np.asarray(res.tree_reason)[self.rows].T

    def admissible(
        self,
        settings: Settings,
        met_tol: tuple[NDArray[np.bool_], NDArray[np.bool_]],
        share: float = 0.0,
        at: NDArray[np.intp] | None = None,
    ) -> NDArray[np.bool_]:
        """Per candidate (of ``at``, else all): as good as its frame's own solve for each of
        this tree's goals: a goal the own solve met stays met, one it did not meet ends no
        farther off (+ tolerance / 10, or + ``share`` of the own solve's error where that is
        more; rotation errors alike). The rule a wave carries on by (2, 3); the path takes
        ``as_good`` ones."""
        at = np.arange(len(self.frame)) if at is None else at
        f = self.frame[at]
        free_pos, free_rot = met_tol[0][self.tree], met_tol[1][self.tree]
        tol, rtol = settings.tolerance, settings.rotation_tolerance
        own_pos, own_rot = self.pos[f], self.ori[f]
        ok_pos = free_pos | (self.pos[at] <= no_worse(own_pos, tol, share))
        ok_rot = free_rot | (self.ori[at] <= no_worse(own_rot, rtol, share))
        keep = np.all(ok_pos, axis=1) & np.all(ok_rot, axis=1)
        return np.asarray(keep | (self.source[at] < 0))

    def as_good(
        self,
        settings: Settings,
        met_tol: tuple[NDArray[np.bool_], NDArray[np.bool_]],
        share: float,
        at: NDArray[np.intp] | None = None,
    ) -> NDArray[np.bool_]:
        """Per candidate (of ``at``, else all): as good as its frame's own solve for the tree
        as a whole, the path's rule (3, 4; ``goals.no_worse_together``): each goal the own
        solve met (its position, its rotation) stays met, and the ones it did not meet are
        judged together by the solve's own measure, the root of sum w e^2 over their rows'
        weights: no larger than the own solve's plus tolerance / 10 a goal or plus ``share``
        of it. Goals in conflict have many compromises; one a little nearer one goal and a
        little farther from another is as good for the tree (a goal alone: ``admissible``)."""
        at = np.arange(len(self.frame)) if at is None else at
        f = self.frame[at]
        ok = no_worse_together(
            (self.pos[f], self.ori[f]),
            (self.pos[at], self.ori[at]),
            self.weight,
            (met_tol[0][self.tree], met_tol[1][self.tree]),
            (settings.tolerance, settings.rotation_tolerance),
            share,
        )
        return np.asarray((self.source[at] < 0) | ok)

    def misses(
        self, settings: Settings, met_tol: tuple[NDArray[np.bool_], NDArray[np.bool_]]
    ) -> Array:
        """(candidates,) the goals each leaves unmet (positions and rotations counted apart)."""
        free_pos, free_rot = met_tol[0][self.tree], met_tol[1][self.tree]
        far = ~free_pos & (self.pos > settings.tolerance)
        turned = ~free_rot & (self.ori > settings.rotation_tolerance)
        return np.asarray(np.sum(far, axis=1) + np.sum(turned, axis=1), dtype=float)

    def jumps(self, angle: float) -> Array:
        """(F-1,) bones over ``angle`` per step of the chosen path."""
        return np.asarray(np.sum(joint_steps(self.rot[self.chosen]) > angle, axis=1))


@one_thread
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
    if result.goal_status is None:  # (a range joined from chunks) the goals unmet in reach
        result = replace(result, goal_status=goal_status(skeleton, g, result, settings))
    met_tol = (g.w_pos <= 0) | g.is_aim, (g.w_rot <= 0) & ~(g.is_aim & (g.w_pos > 0))
    w_rot = np.where(g.is_aim, g.w_pos, g.w_rot)  # an aim goal's angle: its position rows'
    # first each tree with the trees it carries as one unit (module docstring, 7), then the
    # carried trees again on their own, from their carriers' repaired poses
    carried = [i for i, below in enumerate(tree_carriers(skeleton, trees)) if below]
    every = np.arange(frames)
    steps = _jumps(result.pose, moved, angle)
    for level in (list(range(len(trees))), carried):
        if not level:
            continue
        state, own = [], []
        for k, unit in enumerate(carry_groups(skeleton, [trees[i] for i in level])):
            rows = [i for i in level if np.isin(trees[i], unit).all()]
            sub, keep, _ = skeleton.subtree(unit)
            inner = [unit[t] for t in ik_trees(sub)]
            order = [next(j for j, t in enumerate(inner) if set(t) == set(trees[i])) for i in rows]
            g_unit = tree_goals(goals, every, unit, skeleton.n_effectors)
            # one tree: its goals prepared once (``solve_tree``); more: ``solve`` orders them
            ready = prepare_goals(g_unit, sub.n_effectors) if len(rows) == 1 else None
            own.append((sub, keep, g_unit, ready, order))
            bones = np.sort(np.concatenate([moved[i] for i in rows]))
            state.append(_Tree(k, unit, bones, result, rows, (g.w_pos[unit], w_rot[unit])))
        base = start if level is not carried else _held(start, result.pose, trees, moved, carried)
        _rounds(state, own, base, frames, angle, settings, met_tol, report)
        result = _apply(skeleton, g, settings, result, state, report)
    report.before, report.after = steps, _jumps(result.pose, moved, angle)
    return result, report


def _jumps(pose: Pose, moved: list[Array], angle: float) -> int:
    """Bone steps over ``angle`` between consecutive frames, over the bones the trees move."""
    bones = np.concatenate(moved)
    return count_jumps(pose.rotations[:, bones], angle)


def _held(
    start: Pose, pose: Pose, trees: list[NDArray[np.intp]], moved: list[Array], carried: list[int]
) -> Pose:
    """``start`` with the bones of the trees that are not ``carried`` from ``pose``: what the
    carried trees are solved on."""
    base = start.copy()
    for i in range(len(trees)):
        if i not in carried:
            b = moved[i]
            base.rotations[:, b] = pose.rotations[:, b]
            base.locations[:, b] = pose.locations[:, b]
            base.stretch[:, b] = pose.stretch[:, b]
    return base


_Unit = tuple[Skeleton, NDArray[np.intp], Goals, PreparedGoals | None, list[int]]
"""A repair unit's own problem: its skeleton (``Skeleton.subtree``), the bones of it kept, its
goals, those prepared once where it is one tree (else None), and the order of its trees."""


def _rounds(
    state: list[_Tree],
    own: list[_Unit],
    base: Pose,
    frames: int,
    angle: float,
    settings: Settings,
    met_tol: tuple[NDArray[np.bool_], NDArray[np.bool_]],
    report: FlipRepair,
) -> None:
    """The re-solves of the units ``state`` (steps 2-6 and 8 of the module docstring); the bones
    of no unit hold their pose in ``base``."""
    fresh: list[NDArray[np.intp]] = [np.zeros(0, dtype=np.intp) for _ in state]
    passes = rounds = 0
    while True:
        # per tree, (frame, source candidate, direction) to solve: the waves that last
        # round's admissible candidates carry on (one frame further, while they still jump
        # from the chosen pose next to them); when no wave is left, the path is chosen again
        # (Viterbi) and a new pass starts from both frames of each jump left on it
        want = _waves(state, fresh, frames, angle, settings, met_tol)
        if not any(want) or rounds >= ROUNDS:
            _choose(state, frames, angle, settings, met_tol)
            while not any(want) and passes <= PASSES and rounds < ROUNDS:
                passes += 1
                want = _jump_asks(state, angle) if passes <= PASSES else _reach_asks(state, frames)
            if not any(want):
                break
        rounds += 1
        report.rounds += 1
        # each tree with requests is solved alone, on its own skeleton (trees are independent:
        # ``solve`` gives a tree with others present what it gives alone), all its requests in
        # one batch
        for i, (s, asks) in enumerate(zip(state, want, strict=True)):
            fresh[i] = len(s.frame) + np.arange(len(asks))
            if not asks:
                continue
            ask = np.array(asks, dtype=np.intp)
            source = ask[:, 1]
            begin = (s.rot[source], s.loc[source], s.stretch[source])
            _solve_asks(s, own[s.index], base, ask, begin, settings, report)
    _bridges(state, own, base, frames, angle, settings, met_tol, report)


def _solve_asks(
    s: _Tree,
    own: _Unit,
    base: Pose,
    ask: NDArray[np.intp],
    begin: tuple[Array, Array, Array],
    settings: Settings,
    report: FlipRepair,
) -> None:
    """Solve the unit's frames ``ask[:, 0]`` from the unit's bones at ``begin`` (rotations,
    locations, stretch), the other bones at ``base``; the results become candidates with source
    ``ask[:, 1]`` and way ``ask[:, 2]``."""
    index = ask[:, 0]
    sub, keep, g_unit, ready, order = own
    at = np.searchsorted(keep, s.bones)  # the unit's bones among the subtree's
    start = base.take(index).of_bones(keep)
    start.rotations[:, at], start.locations[:, at], start.stretch[:, at] = begin
    if ready is not None:
        res = solve_tree(sub, ready.take(index), settings, start)
    else:
        res = solve_range(sub, take_frames(g_unit, index), settings, start, status=False)
    if res.tree_reason is None:
        reasons = np.asarray(res.reason)[:, None]
    else:
        reasons = np.asarray(res.tree_reason)[order].T
    s.add(index, ask[:, 1], ask[:, 2], res, at, reasons)
    report.solved += len(ask)


@dataclass
class _Bridge:
    """One side of a jump's bridge (8): the frames it solves in order, the candidate the next
    one starts from (the jump's own side, then the bridge's last), its direction."""

    frames: list[int]
    last: int
    way: int


def _bridges(
    state: list[_Tree],
    own: list[_Unit],
    base: Pose,
    frames: int,
    angle: float,
    settings: Settings,
    met_tol: tuple[NDArray[np.bool_], NDArray[np.bool_]],
    report: FlipRepair,
) -> None:
    """Step 8: each jump left on the chosen path, from candidate a (frame f) to b (frame
    f + 1), bridged both ways over k frames: f + 1 .. f + k each solved from the bridge's
    pose of the frame before (a's for the first) turned 1 / (the frames left) of the way toward
    the chosen pose of the frame, so the last starts at it; f .. f - k + 1 alike from b. Then
    the path is chosen again."""
    if BRIDGE <= 0:
        return
    plans: list[list[_Bridge]] = []
    for s in state:
        plan = []
        steps = joint_steps(s.rot[s.chosen]).max(axis=1)
        for f in np.flatnonzero(steps > angle).tolist():
            k = min(BRIDGE, math.ceil(steps[f] / (BRIDGE_SHARE * angle)))
            ahead = list(range(f + 1, min(f + 1 + k, frames)))
            back = list(range(f, max(f - k, -1), -1))
            plan += [_Bridge(ahead, int(s.chosen[f]), 1), _Bridge(back, int(s.chosen[f + 1]), -1)]
        plans.append(plan)
    longest = max((len(b.frames) for plan in plans for b in plan), default=0)
    for k in range(longest):
        for s, plan in zip(state, plans, strict=True):
            live = [b for b in plan if k < len(b.frames)]
            if not live:
                continue
            ask = np.array([(b.frames[k], b.last, b.way) for b in live], dtype=np.intp)
            prev, to = ask[:, 1], s.chosen[ask[:, 0]]
            share = np.array([1.0 / (len(b.frames) - k) for b in live])
            turn = angle_axis(np.swapaxes(s.rot[prev], -1, -2) @ s.rot[to])
            rot = s.rot[prev] @ exp_so3(turn * share[:, None, None])
            loc = s.loc[prev] + (s.loc[to] - s.loc[prev]) * share[:, None, None]
            stretch = s.stretch[prev] + (s.stretch[to] - s.stretch[prev]) * share[:, None]
            first = len(s.frame)
            _solve_asks(s, own[s.index], base, ask, (rot, loc, stretch), settings, report)
            for j, b in enumerate(live):
                s.starts[first + j] = (rot[j], loc[j], stretch[j])
                b.last = first + j
        report.rounds += 1
    if longest:
        _choose(state, frames, angle, settings, met_tol)


def _waves(
    state: list[_Tree],
    fresh: list[NDArray[np.intp]],
    frames: int,
    angle: float,
    settings: Settings,
    met_tol: tuple[NDArray[np.bool_], NDArray[np.bool_]],
) -> list[list[tuple[int, int, int]]]:
    """Per tree, the waves carried on: from each fresh frontier (of the candidates solved from
    one source, the farthest from it) that is admissible and still jumps from the chosen pose
    of the next frame, the next ``WAVE`` frames in its direction, each solved from the
    frontier's pose (not solved before)."""
    want = []
    for s, new in zip(state, fresh, strict=True):
        asks: list[tuple[int, int, int]] = []
        if new.size:
            src = s.source[new]
            reach = np.abs(s.frame[new] - s.frame[src])
            farthest = np.zeros(len(s.frame), dtype=reach.dtype)
            np.maximum.at(farthest, src, reach)
            way = s.way[new]
            nxt = s.frame[new] + way
            go = (reach >= farthest[src]) & (nxt >= 0) & (nxt < frames)  # frontiers in range
            c = new[go]
            step = joint_steps(np.stack([s.rot[c], s.rot[s.chosen[nxt[go]]]]))[0].max(axis=1)
            # admissible, or as good for the tree and still flipping from the pose next to it
            ok = s.admissible(settings, met_tol, at=c)
            flip = ~ok & (step > FLIP_ANGLE)
            if flip.any():
                ok[flip] = s.as_good(settings, met_tol, 0.0, at=c[flip])
            c = c[ok & (step > angle)]  # still jumps from the chosen pose next to it
            for cand in c.tolist():
                w = int(s.way[cand])
                n = int(s.frame[cand]) + w
                asks += [(n + k * w, cand, w) for k in range(WAVE) if 0 <= n + k * w < frames]
        want.append(_untried(s, asks))
    return want


def _jump_asks(state: list[_Tree], angle: float) -> list[list[tuple[int, int, int]]]:
    """Per tree, both frames of each jump on the chosen path, from the other's pose."""
    want = []
    for s in state:
        asks = []
        for f in np.flatnonzero(s.jumps(angle)):
            asks += [(int(f) + 1, int(s.chosen[f]), 1), (int(f), int(s.chosen[f + 1]), -1)]
        want.append(_untried(s, asks))
    return want


def _reach_asks(state: list[_Tree], frames: int) -> list[list[tuple[int, int, int]]]:
    """Per tree, each frame whose own solve leaves a goal unmet in reach, from the chosen poses
    ``REACH_STARTS`` frames off."""
    want = []
    for s in state:
        asks = []
        c, every = s.conflict, np.arange(frames)
        begin = c & ~np.concatenate([[False], c[:-1]])  # the first frame of each run of them
        since = every - np.maximum.accumulate(np.where(begin, every, 0))
        for f in np.flatnonzero(c & (since % REACH_EVERY == 0)).tolist():
            for d in REACH_STARTS:
                if 0 <= f + d < frames:
                    asks.append((f, int(s.chosen[f + d]), 1 if d < 0 else -1))
        want.append(_untried(s, asks))
    return want


def _untried(s: _Tree, asks: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    out = []
    for frame, c, way in asks:
        if (frame, c) not in s.tried:
            s.tried.add((frame, c))
            out.append((frame, c, way))
    return sorted(out)


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
    state: list[_Tree],
    frames: int,
    angle: float,
    settings: Settings,
    met_tol: tuple[NDArray[np.bool_], NDArray[np.bool_]],
) -> None:
    """Each tree's chosen candidate per frame: the cheapest admissible path (Viterbi), segment
    by segment of frames that have more than their own candidate (every tree's segments in
    one shortest-path walk, ``_viterbi``)."""
    segments = []  # (tree, its rows of the table, node cost, transition cost)
    for s in state:
        s.chosen = np.arange(frames)
        solved = np.flatnonzero(s.source >= 0)  # (the own solves are always as good)
        extra = solved[s.as_good(settings, met_tol, CHOICE_SHARE, at=solved)]
        at = s.frame[extra]
        order = np.argsort(at, kind="stable")  # per frame in candidate order: deterministic
        extra, at = extra[order], at[order]
        count = np.bincount(at, minlength=frames)
        rank = np.arange(extra.size) - np.concatenate([[0], np.cumsum(count)])[at]
        width = 1 + int(count.max(initial=0))
        table = np.repeat(np.arange(frames)[:, None], width, axis=1)  # column 0: the own solve
        table[at, 1 + rank] = extra
        valid = np.arange(width)[None] <= count[:, None]
        many = count > 0
        miss = s.misses(settings, met_tol)  # (candidates,) once for the tree's segments
        # segments of frames with several options, with one frame of context either side
        starts = np.flatnonzero(many & ~np.concatenate([[False], many[:-1]]))
        for a in starts:
            b = a
            while b + 1 < frames and many[b + 1]:
                b += 1
            span = slice(max(a - 1, 0), min(b + 1, frames - 1) + 1)
            cells = table[span]
            segments.append((s, cells, *_costs(s, cells, valid[span], angle, miss[cells])))
    if not segments:
        return
    paths = _viterbi([x[2] for x in segments], [x[3] for x in segments])
    for (s, rows, _, _), path in zip(segments, paths, strict=True):
        s.chosen[rows[:, 0]] = rows[np.arange(len(rows)), path]  # (column 0: the frame's own)


def _costs(
    s: _Tree, table: NDArray[np.intp], valid: NDArray[np.bool_], angle: float, miss: Array
) -> tuple[Array, Array]:
    """A segment's costs: (L, W) of taking each candidate of ``table`` (inf where not valid,
    ``NEIGHBOUR_COST`` for one solved from a neighbour) and (L-1, W, W) of each step from a
    candidate to the next frame's: each bone step over ``angle`` costs 1 and ``OVER_WEIGHT``
    per squared radian beyond ``angle``, each radian ``SMOOTH_WEIGHT``."""
    node = np.where(valid, np.where(s.source[table] >= 0, NEIGHBOUR_COST, 0.0), np.inf)
    node += MISS_COST * miss
    length, width, bones = table.shape + s.rot.shape[1:2]
    # (L, B, W, 9): per bone the candidates' rotations as rows, so the trace of R_p^T R_c of
    # every pair of neighbouring candidates is one small matrix product a bone, and the sums
    # over bones run along the outer axis (several times faster than one einsum over the
    # bones and a reduction along a last axis of 3-10)
    rot = s.rot[table].reshape(length, width, bones, 9).transpose(0, 2, 1, 3)
    cos = (rot[:-1] @ np.swapaxes(rot[1:], -1, -2) - 1.0) / 2.0
    step = np.arccos(np.clip(cos, -1.0, 1.0))  # (L-1, B, P, C)
    over = np.maximum(step - angle, 0.0)
    trans = np.sum(step > angle, axis=1) + OVER_WEIGHT * np.sum(over * over, axis=1)
    trans += SMOOTH_WEIGHT * step.sum(axis=1)
    return node, trans


def _viterbi(nodes: list[Array], transitions: list[Array]) -> list[NDArray[np.intp]]:
    """Per segment, the column of the cheapest sequence of candidates, one per row, under the
    costs of ``_costs`` (ties go to the lowest column). The segments walk side by side, padded
    to the longest and widest: a padded column costs inf, and so does every candidate past a
    segment's end, but a step there costs nothing: the walk back from anywhere past the end
    enters the segment at its cheapest last candidate, as the segment walked alone ends."""
    n, length = len(nodes), max(len(x) for x in nodes)
    width = max(x.shape[1] for x in nodes)
    node = np.full((n, length, width), np.inf)
    trans = np.zeros((n, length - 1, width, width))
    for k, (nd, tr) in enumerate(zip(nodes, transitions, strict=True)):
        rows, w = nd.shape
        node[k, :rows, :w] = nd
        trans[k, : rows - 1, :w, :w] = tr
    cost = node[:, 0]
    back = np.empty((length - 1, n, width), dtype=np.intp)
    every, cols = np.arange(n)[:, None], np.arange(width)[None]
    for k in range(length - 1):
        total = cost[:, :, None] + trans[:, k]  # (segment, from, to)
        back[k] = np.argmin(total, axis=1)
        cost = total[every, back[k], cols] + node[:, k + 1]
    path = np.empty((length, n), dtype=np.intp)
    path[-1] = np.argmin(cost, axis=1)
    for k in range(length - 2, -1, -1):
        path[k] = back[k][np.arange(n), path[k + 1]]
    return [path[: len(nd), k] for k, nd in enumerate(nodes)]


def _apply(
    skeleton: Skeleton,
    g: PreparedGoals,
    settings: Settings,
    result: SolveResult,
    state: list[_Tree],
    report: FlipRepair,
) -> SolveResult:
    """``result`` with the chosen candidates of the trees ``state`` written in;
    ``report.start`` their starts."""
    pose = result.pose.copy()
    pos, rot = result.position_error.copy(), result.rotation_error.copy()
    iterations = np.array(result.iterations, copy=True)
    if result.tree_reason is not None:
        reasons = np.asarray(result.tree_reason).astype(object)  # (T, F)
    else:
        reasons = np.asarray(result.reason).astype(object)[None]
    changed = np.zeros(pose.frames, dtype=bool)
    for s in state:
        frames = np.flatnonzero(s.chosen != np.arange(pose.frames))
        if frames.size == 0:
            continue
        changed[frames] = True
        c = s.chosen[frames]
        at = np.ix_(frames, s.bones)
        pose.rotations[at], pose.locations[at], pose.stretch[at] = s.rot[c], s.loc[c], s.stretch[c]
        src = s.source[c]
        report.start.rotations[at] = s.rot[src]
        report.start.locations[at] = s.loc[src]
        report.start.stretch[at] = s.stretch[src]
        for f, cand in zip(frames.tolist(), c.tolist(), strict=True):
            if cand in s.starts:
                rot_s, loc_s, stretch_s = s.starts[cand]
                report.start.rotations[f, s.bones] = rot_s
                report.start.locations[f, s.bones] = loc_s
                report.start.stretch[f, s.bones] = stretch_s
        pos[np.ix_(frames, s.tree)], rot[np.ix_(frames, s.tree)] = s.pos[c], s.ori[c]
        reasons[np.ix_(np.asarray(s.rows), frames)] = s.reason[c].T
        iterations[frames] = np.maximum(iterations[frames], s.iterations[c])
        report.changed[frames] = True
    out = replace(result, pose=pose, position_error=pos, rotation_error=rot, iterations=iterations)
    out = _with_reasons(out, reasons)
    out.goal_status = goal_status_at(
        skeleton, g, out, settings, result.goal_status, np.flatnonzero(changed)
    )
    return out


def _with_reasons(result: SolveResult, reasons: NDArray[np.object_]) -> SolveResult:
    """``result`` with its trees' reasons (T, F): a frame's reason is "converged" when every
    tree converged, else the first tree's that did not."""
    text: NDArray[np.str_] = reasons.astype(str)
    first = np.argmax(text != "converged", axis=0)
    out = replace(result, reason=text[first, np.arange(text.shape[1])])
    if result.tree_reason is not None:
        out.tree_reason = text
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
