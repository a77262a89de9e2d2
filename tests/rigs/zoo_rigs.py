"""The zoo's rigs, generated from a seed: bones, IK constraints and target paths (numpy only).

Kinds, in the order ``--count`` cycles through them:

- **humanoid**: random proportions (height 1.5-1.9, limb and spine ratios); hands, feet, and
  (4-6 goals) a head and a chest; hand chains of 3 (upper arm to hand) or through the spine
  (6: to the spine); a head goal through the chest; some with orientation goals on the hands
  or the head.
- **quadruped**: a spine from the pelvis, four 3-bone legs, a 4-6 bone tail and a neck, goals
  on the four feet, the tail tip and the head.
- **spider**: a body with 6-8 legs of 3-4 bones radiating out, one goal per foot.
- **tentacle**: one chain of 20-40 bones, slightly curled, one goal at its tip (chain to root);
  ``long_tentacle`` (50-100 bones) only when asked for (``--kinds long_tentacle``).
- **tree**: double-Y-like: a 2-3 bone trunk branching into two arms, each into two fingers of
  2-3 bones; one goal per fingertip with chain to the root (the chains share the trunk).

Not in the cycle, only when asked for (``--kinds``):

- **creature** (``--kinds creature``): a random branching skeleton of 14-30 bones with 2-5
  goals on random bones, chains of 2-6 or to the root.
- **snake** (``--kinds snake``): a tentacle of 12-24 bones with 2-3 goals along it, each chain
  to the root: goals nested on one chain (a tail's middle and tip).

Targets: each goal's target circles its chain's *fixed base* along a smooth path. The goal's IK
tree is the union of the chains that share bones with its chain or carry it (a hand chain of 3
on a chest that the head's chain turns belongs to the head's tree); its fixed base is the head
of the tree's topmost moving bone above the goal, which never moves (nothing above is
animated). The path: the rest direction of the goal tip wobbled by a few sinusoids, at a distance
rho(t) times the goal's reach (the length along the joints, the heads of the tree's moving bones
above the goal, from the base to the tip) with
rho between about 0.5 and 1.35, so some frames are out of reach. Orientation goals turn
smoothly within 35 degrees of the bone's rest orientation.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from jacobian_ik.solvers import exp_so3

Vec = tuple[float, float, float]
Bone = tuple[str, Vec, Vec, str | None, bool]
KINDS = ("humanoid", "quadruped", "spider", "tentacle", "tree")


@dataclass
class Goal:
    bone: str
    chain: int  # IK constraint chain_count (0: to the root)
    orient: float = 0.0  # orient_weight of the constraint (0: position only)


@dataclass
class ZooRig:
    name: str
    kind: str
    bones: list[Bone]
    goals: list[Goal]
    seed: int
    description: str = ""
    params: dict[str, float | int | bool] = field(default_factory=dict)


def _v(x: Sequence[float]) -> Vec:
    return (float(x[0]), float(x[1]), float(x[2]))


# ----------------------------------------------------------------------------------------------
# generators


def humanoid(rng: np.random.Generator, name: str, seed: int) -> ZooRig:
    h = rng.uniform(1.5, 1.9)
    leg = h * rng.uniform(0.46, 0.52)
    hip_z = leg + 0.04 * h
    spine_len = h * rng.uniform(0.26, 0.32)
    neck, head = 0.05 * h, 0.12 * h
    arm = h * rng.uniform(0.40, 0.46)
    shoulder_w, hip_w = h * rng.uniform(0.09, 0.12), h * rng.uniform(0.05, 0.07)
    thigh_r = rng.uniform(0.48, 0.54)
    upper_r = rng.uniform(0.50, 0.56)
    z1, z2 = hip_z + 0.4 * spine_len, hip_z + spine_len
    bones: list[Bone] = [
        ("hips", (0, 0, hip_z), (0, 0, hip_z + 0.08), None, False),
        ("spine", (0, 0, hip_z + 0.08), (0, 0, z1), "hips", True),
        ("chest", (0, 0, z1), (0, 0, z2), "spine", True),
        ("neck", (0, 0, z2), (0, -0.01, z2 + neck), "chest", True),
        ("head", (0, -0.01, z2 + neck), (0, -0.03, z2 + neck + head), "neck", True),
    ]
    for side, s in (("L", 1.0), ("R", -1.0)):
        sz = z2 - 0.03 * h
        x0, x1 = 0.02 * s, shoulder_w * s
        elbow = x1 + upper_r * arm * s
        wrist = x1 + 0.9 * arm * s
        bones += [
            (f"shoulder.{side}", (x0, 0, sz), (x1, 0, sz), "chest", False),
            (f"upper_arm.{side}", (x1, 0, sz), (elbow, 0.03, sz - 0.02), f"shoulder.{side}", True),
            (
                f"forearm.{side}",
                (elbow, 0.03, sz - 0.02),
                (wrist, 0, sz - 0.03),
                f"upper_arm.{side}",
                True,
            ),
            (
                f"hand.{side}",
                (wrist, 0, sz - 0.03),
                (x1 + arm * s, 0, sz - 0.03),
                f"forearm.{side}",
                True,
            ),
        ]
        knee_z = hip_z - thigh_r * leg
        bones += [
            (f"thigh.{side}", (hip_w * s, 0, hip_z), (hip_w * s, -0.03, knee_z), "hips", False),
            (
                f"shin.{side}",
                (hip_w * s, -0.03, knee_z),
                (hip_w * s, 0, 0.08),
                f"thigh.{side}",
                True,
            ),
            (f"foot.{side}", (hip_w * s, 0, 0.08), (hip_w * s, -0.15, 0.02), f"shin.{side}", True),
        ]
    through_spine = bool(rng.random() < 0.5)
    n_goals = int(rng.integers(4, 7))
    orient_hands = bool(rng.random() < 0.35)
    hand_chain = 6 if through_spine else 3
    goals = [Goal(f"hand.{s}", hand_chain, 0.5 if orient_hands else 0.0) for s in "LR"]
    goals += [Goal(f"foot.{s}", 3) for s in "LR"]
    if n_goals >= 5:
        goals.append(Goal("head", 3, 0.5 if rng.random() < 0.35 else 0.0))  # through the chest
    if n_goals >= 6:
        goals.append(Goal("chest", 2))
    desc = (
        f"height {h:.2f}, {n_goals} goals, hand chains "
        f"{'through the spine (6)' if through_spine else 'of 3'}"
        + (", orientation goals" if any(g.orient for g in goals) else "")
    )
    params = {"height": round(h, 3), "through_spine": through_spine, "goals": n_goals}
    return ZooRig(name, "humanoid", bones, goals, seed, desc, params)


def quadruped(rng: np.random.Generator, name: str, seed: int) -> ZooRig:
    length = rng.uniform(0.8, 1.4)
    leg = length * rng.uniform(0.45, 0.6)
    y_hip, y_sh = 0.0, -length
    z = leg + 0.05
    n_tail = int(rng.integers(4, 7))
    bones: list[Bone] = [
        ("pelvis", (0, y_hip + 0.1, z), (0, y_hip, z), None, False),
        ("spine.0", (0, y_hip, z), (0, y_hip - length / 2, z + 0.03), "pelvis", True),
        ("spine.1", (0, y_hip - length / 2, z + 0.03), (0, y_sh, z + 0.05), "spine.0", True),
        ("neck", (0, y_sh, z + 0.05), (0, y_sh - 0.2 * length, z + 0.25 * length), "spine.1", True),
        (
            "head",
            (0, y_sh - 0.2 * length, z + 0.25 * length),
            (0, y_sh - 0.4 * length, z + 0.2 * length),
            "neck",
            True,
        ),
    ]
    seg = rng.uniform(0.12, 0.2) * length
    prev, p = "pelvis", np.array([0, y_hip + 0.1, z])
    for i in range(n_tail):
        q = p + np.array([0, seg * math.cos(0.25 * i), -seg * math.sin(0.25 * i)])
        bones.append((f"tail.{i}", _v(p), _v(q), prev, i > 0))
        prev, p = f"tail.{i}", q
    goals = []
    for end, parent, y in (("hind", "pelvis", y_hip), ("front", "spine.1", y_sh)):
        for side, s in (("L", 1.0), ("R", -1.0)):
            x = 0.12 * length * s
            k1, k2 = z - 0.45 * leg, z - 0.9 * leg
            dy = 0.06 * (1 if end == "hind" else -1)
            bones += [
                (f"{end}_upper.{side}", (x, y, z), (x, y + dy, k1), parent, False),
                (f"{end}_lower.{side}", (x, y + dy, k1), (x, y, k2), f"{end}_upper.{side}", True),
                (f"{end}_foot.{side}", (x, y, k2), (x, y - 0.05, 0.0), f"{end}_lower.{side}", True),
            ]
            goals.append(Goal(f"{end}_foot.{side}", 3))
    goals.append(Goal(f"tail.{n_tail - 1}", n_tail))
    goals.append(Goal("head", 2))
    desc = f"body {length:.2f}, legs {leg:.2f}, tail of {n_tail}, 6 goals"
    return ZooRig(name, "quadruped", bones, goals, seed, desc, {"tail": n_tail})


def spider(rng: np.random.Generator, name: str, seed: int) -> ZooRig:
    n_legs = int(rng.integers(6, 9))
    n_seg = int(rng.integers(3, 5))
    r0, z = 0.15, rng.uniform(0.3, 0.5)
    bones: list[Bone] = [("body", (0, 0.1, z), (0, -0.1, z), None, False)]
    goals = []
    for k in range(n_legs):
        a = 2 * math.pi * (k + 0.5) / n_legs + rng.uniform(-0.1, 0.1)
        u = np.array([math.cos(a), math.sin(a), 0.0])
        p = np.array([0, 0, z]) + r0 * u
        segs = rng.uniform(0.15, 0.3, size=n_seg)
        rises = np.linspace(0.6, -1.2, n_seg)  # up, then down to the ground
        prev = "body"
        for i in range(n_seg):
            d = u + np.array([0, 0, rises[i]])
            q = p + segs[i] * d / np.linalg.norm(d)
            bones.append((f"leg{k}.{i}", _v(p), _v(q), prev, i > 0))
            prev, p = f"leg{k}.{i}", q
        goals.append(Goal(f"leg{k}.{n_seg - 1}", n_seg))
    desc = f"{n_legs} legs of {n_seg} bones"
    return ZooRig(name, "spider", bones, goals, seed, desc, {"legs": n_legs, "segments": n_seg})


def tentacle(rng: np.random.Generator, name: str, seed: int, n: int | None = None) -> ZooRig:
    n = n or int(rng.integers(20, 41))
    lengths = rng.uniform(0.06, 0.12, size=n)
    curl = rng.uniform(0.0, 0.05)
    bones: list[Bone] = []
    p, ang = np.zeros(3), 0.0
    for i in range(n):
        ang += curl
        q = p + lengths[i] * np.array([math.sin(ang), 0.0, math.cos(ang)])
        bones.append((f"t{i:02d}", _v(p), _v(q), f"t{i - 1:02d}" if i else None, i > 0))
        p = q
    desc = f"{n} bones, length {lengths.sum():.2f}, curl {math.degrees(curl):.1f} deg/bone"
    return ZooRig(name, "tentacle", bones, [Goal(f"t{n - 1:02d}", 0)], seed, desc, {"bones": n})


def tree(rng: np.random.Generator, name: str, seed: int) -> ZooRig:
    n_trunk, n_finger = int(rng.integers(2, 4)), int(rng.integers(2, 4))
    bones: list[Bone] = []
    p = np.array([0.0, 0.0, 0.0])
    prev: str | None = None
    for i in range(n_trunk):
        q = p + np.array([0, 0, rng.uniform(0.3, 0.5)])
        bones.append((f"trunk.{i}", _v(p), _v(q), prev, prev is not None))
        prev, p = f"trunk.{i}", q
    goals = []
    for a, side in ((1.0, "R"), (-1.0, "L")):
        spread = rng.uniform(0.5, 0.9)
        arm_end = p + rng.uniform(0.3, 0.5) * np.array([a * math.sin(spread), 0, math.cos(spread)])
        bones.append((f"arm.{side}", _v(p), _v(arm_end), prev, True))
        for f, fa in enumerate((-0.4, 0.4)):
            q0, parent = arm_end, f"arm.{side}"
            ang = spread + fa + rng.uniform(-0.15, 0.15)
            for i in range(n_finger):
                q1 = q0 + rng.uniform(0.25, 0.45) * np.array(
                    [a * math.sin(ang), 0.1 * f, math.cos(ang)]
                )
                bname = f"f{side}{f}.{i}"
                bones.append((bname, _v(q0), _v(q1), parent, True))
                q0, parent = q1, bname
            goals.append(Goal(parent, 0))
    desc = f"trunk {n_trunk}, 2 arms, 4 fingers of {n_finger}; chains to the root (shared)"
    return ZooRig(name, "tree", bones, goals, seed, desc, {"trunk": n_trunk, "finger": n_finger})


def long_tentacle(rng: np.random.Generator, name: str, seed: int) -> ZooRig:
    """A tentacle of 50-100 bones (``--kinds long_tentacle``; not in the default cycle)."""
    return tentacle(rng, name, seed, int(rng.integers(50, 101)))


def snake(rng: np.random.Generator, name: str, seed: int) -> ZooRig:
    """One chain of 12-24 bones with 2-3 goals along it, each chain to the root: nested goals
    on one chain (``--kinds snake``; not in the default cycle)."""
    n = int(rng.integers(12, 25))
    base = tentacle(rng, name, seed, n)
    k = int(rng.integers(2, 4))
    at = sorted({round(n * (i + 1) / k) - 1 for i in range(k)})
    goals = [Goal(f"t{i:02d}", 0) for i in at]
    desc = f"{n} bones, goals on bones {', '.join(str(i + 1) for i in at)} (chains to the root)"
    return ZooRig(name, "snake", base.bones, goals, seed, desc, {"bones": n, "goals": len(at)})


def creature(rng: np.random.Generator, name: str, seed: int) -> ZooRig:
    """A random branching skeleton of 14-30 bones (each bone grows from a random earlier one,
    its tail or part way along it, connected where it starts at the tail) with 2-5 goals on
    random bones, chains of 2-6 bones or to the root: carried, nested and overlapping chains
    in combinations no other kind makes (``--kinds creature``; not in the default cycle)."""
    n = int(rng.integers(14, 31))

    def grow() -> np.ndarray:  # a bone's vector: a random length, pointing up more or less
        direction = rng.normal(size=3) + np.array([0.0, 0.0, 1.0])
        return np.asarray(direction / np.linalg.norm(direction) * rng.uniform(0.1, 0.4))

    heads, tails = [np.zeros(3)], [grow()]
    bones: list[Bone] = [("b00", _v(heads[0]), _v(tails[0]), None, False)]
    for i in range(1, n):
        vector = grow()
        parent = int(rng.integers(0, i))
        at_tail = bool(rng.random() < 0.75)
        if at_tail:
            head = tails[parent]
        else:
            head = heads[parent] + rng.uniform(0.3, 0.9) * (tails[parent] - heads[parent])
        tail = head + vector
        bones.append((f"b{i:02d}", _v(head), _v(tail), f"b{parent:02d}", at_tail))
        heads.append(head)
        tails.append(tail)
    children = {b[3] for b in bones}
    leaves = [b[0] for b in bones if b[0] not in children]
    others = [b[0] for b in bones[1:] if b[0] in children]
    k = int(rng.integers(2, 6))
    picks = list(rng.permutation(leaves))[:k]
    if len(picks) < k and others:
        picks += list(rng.permutation(others))[: k - len(picks)]
    goals = []
    for bone in sorted(picks):
        chain = 0 if rng.random() < 0.25 else int(rng.integers(2, 7))
        goals.append(Goal(str(bone), chain, 0.5 if rng.random() < 0.15 else 0.0))
    desc = f"{n} bones, {len(goals)} goals on " + ", ".join(
        f"{g.bone} ({g.chain or 'root'})" for g in goals
    )
    return ZooRig(name, "creature", bones, goals, seed, desc, {"bones": n, "goals": len(goals)})


GENERATORS = {
    "humanoid": humanoid,
    "quadruped": quadruped,
    "spider": spider,
    "tentacle": tentacle,
    "tree": tree,
    "long_tentacle": long_tentacle,
    "snake": snake,
    "creature": creature,
}


def zoo(seed: int, count: int, kinds: Sequence[str] = KINDS) -> list[ZooRig]:
    """``count`` rigs from ``seed``, cycling through ``kinds``; rig i has its own seed."""
    seeds = np.random.SeedSequence(seed).spawn(count)
    out = []
    for i in range(count):
        kind = kinds[i % len(kinds)]
        rng = np.random.default_rng(seeds[i])
        out.append(GENERATORS[kind](rng, f"{i:02d}_{kind}", int(seeds[i].generate_state(1)[0])))
    return out


# ----------------------------------------------------------------------------------------------
# geometry and targets


@dataclass
class ChainGeometry:
    """Per goal: its IK tree's fixed base, its reach from there and the inner radius."""

    chains: list[list[str]]  # the constraint's bones, goal bone first
    tree: list[int]  # the goal's IK tree: goals whose chains share bones or ride on another's
    base: np.ndarray  # (E, 3) head of the top moving bone of the goal's tree above the goal
    reach: np.ndarray  # (E,) length along the joints (moving bones' heads) from base to tip
    inner: np.ndarray  # (E,) inner radius of the workspace, max(0, 2 longest - reach)
    tip: np.ndarray  # (E, 3) the tip at rest

    @property
    def independent(self) -> bool:
        return len(set(self.tree)) == len(self.tree)


def geometry(rig: ZooRig) -> ChainGeometry:
    parent = {b[0]: b[3] for b in rig.bones}
    head = {b[0]: np.array(b[1], float) for b in rig.bones}
    tail = {b[0]: np.array(b[2], float) for b in rig.bones}
    chains = []
    for g in rig.goals:
        chain, b = [g.bone], parent[g.bone]
        while b is not None and (g.chain == 0 or len(chain) < g.chain):
            chain.append(b)
            b = parent[b]
        chains.append(chain)

    def ancestors(bone: str) -> list[str]:
        out, b = [], parent[bone]
        while b is not None:
            out.append(b)
            b = parent[b]
        return out

    # one IK tree: chains that share bones, or one of which sits on bones another moves
    lineage = [set(c) | set(ancestors(c[-1])) for c in chains]
    tree = list(range(len(chains)))  # connected components (few goals: plain loops)
    changed = True
    while changed:
        changed = False
        for i in range(len(chains)):
            for j in range(len(chains)):
                if tree[i] != tree[j] and (lineage[i] & set(chains[j])):
                    tree[i] = tree[j] = min(tree[i], tree[j])
                    changed = True
    moving = {
        t: set().union(*(chains[i] for i in range(len(chains)) if tree[i] == t)) for t in tree
    }
    base, reach, inner, tip = [], [], [], []
    for i, g in enumerate(rig.goals):
        # the joints from the goal bone up: heads of the tree's moving bones among its ancestors
        joints = [b for b in [g.bone, *ancestors(g.bone)] if b in moving[tree[i]]]
        segs = [float(np.linalg.norm(tail[g.bone] - head[g.bone]))]
        segs += [float(np.linalg.norm(head[c] - head[p])) for c, p in itertools.pairwise(joints)]
        base.append(head[joints[-1]])
        reach.append(sum(segs))
        inner.append(max(0.0, 2 * max(segs) - sum(segs)))
        tip.append(tail[g.bone])
    return ChainGeometry(
        chains, tree, np.array(base), np.array(reach), np.array(inner), np.array(tip)
    )


def _wobble(rng: np.random.Generator, t: np.ndarray, amplitude: float, dims: int = 3) -> np.ndarray:
    """A smooth (F, dims) signal: three sinusoids per dimension, 0.5 to 2 cycles over ``t``."""
    out = np.zeros((len(t), dims))
    for _ in range(3):
        w = 2 * np.pi * rng.uniform(0.5, 2.0, size=dims)
        out += rng.uniform(0.3, 1.0, size=dims) * np.sin(
            np.outer(t, w) + rng.uniform(0, 2 * np.pi, dims)
        )
    return amplitude * out / 2.0


def targets(rig: ZooRig, geo: ChainGeometry, frames: int) -> np.ndarray:
    """(F, E, 3) target positions (see the module docstring)."""
    rng = np.random.default_rng(rig.seed + 1)
    t = np.arange(frames) / max(frames, 2)
    out = np.empty((frames, len(rig.goals), 3))
    for e in range(len(rig.goals)):
        d0 = geo.tip[e] - geo.base[e]
        d = d0 / np.linalg.norm(d0) + _wobble(rng, t, 0.6)
        d /= np.linalg.norm(d, axis=1, keepdims=True)
        w1, w2 = 2 * np.pi * rng.uniform(0.7, 2.0, size=2)
        p1, p2 = rng.uniform(0, 2 * np.pi, size=2)
        rho = 0.72 + 0.2 * np.sin(w1 * t + p1) + 0.45 * np.maximum(0.0, np.sin(w2 * t + p2)) ** 3
        rho = np.maximum(rho, (geo.inner[e] / geo.reach[e]) + 0.1)
        out[:, e] = geo.base[e] + d * (rho * geo.reach[e])[:, None]
    return out


def rotation_offsets(rig: ZooRig, frames: int) -> np.ndarray:
    """(F, E, 3, 3) smooth rotations within about 35 degrees of identity."""
    rng = np.random.default_rng(rig.seed + 2)
    t = np.arange(frames) / max(frames, 2)
    v = np.stack([_wobble(rng, t, 0.35) for _ in rig.goals], axis=1)  # (F, E, 3)
    return np.asarray(exp_so3(v))
