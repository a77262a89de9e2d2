"""Kinematic tree: bones, their joints (degrees of freedom), effectors, forward kinematics and
the Jacobian.

A bone's model-space frame is ``M_b = M_parent' @ rest_b @ T(location_b) @ R_b`` where
``M_parent'`` is the parent's frame moved along its Y axis by the parent's stretch. This is
Blender's pose-bone chain (``matrix_basis`` = T(location) R(rotation)) with the rest matrices
relative to the parent (``parent.matrix_local.inverted() @ bone.matrix_local``).

Degrees of freedom (DOFs) and their Jacobian columns, at the current pose:

- rotation about a bone axis applied *after* the bone's rotation (``R <- R exp(d a)``): the
  axis is the bone's current axis ``Rw_b a``. A ball joint has three such DOFs: incremental
  rotations, no gimbal lock. A hinge has one.
- rotation applied *before* the bone's rotation (``R <- exp(d a) R``): the axis is the rest
  frame's axis ``Rpre_b a``. A two-axis joint ``R = R_p(q1) R_t(q2)`` has one of each, so it
  never twists about its locked axis.
- location along an axis of the rest frame (``Rpre_b a``) and stretch along the bone's Y axis.

The position row of a rotational DOF is ``axis x (p - head)``, its orientation row ``axis``
(Buss 2009, section 2); translational DOFs have ``axis`` in position rows and zero orientation
rows. Every column is checked against finite differences in the tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import SkeletonError
from .so3 import Array, angle_axis, exp_so3, mul, rotate

AXES = "XYZ"
ROT_PRE, ROT_POST, LOCATION, STRETCH = 0, 1, 2, 3
DOF_KEYS = ("rot_x", "rot_y", "rot_z", "loc_x", "loc_y", "loc_z", "stretch")

# Joint kinds, for the limit coordinates of a bone's rotation.
KIND_NONE, KIND_HINGE, KIND_TWO, KIND_BALL = 0, 1, 2, 3


@dataclass(frozen=True)
class Joint:
    """The degrees of freedom of one bone.

    rotation_axes: free rotation axes of the bone's own frame, a subset of "XYZ". Three make a
        ball joint, one a hinge, two a two-axis joint ``R = R_p(q1) R_t(q2)`` whose second
        rotation is Y (the bone's twist) when Y is free, else Z.
    location_axes: free translation axes of the rest frame (Blender's pose location).
    stretch: a translation along the bone's Y axis that moves its tail and children.
    limits: ``{key: (min, max)}`` with keys ``rot_x, rot_y, rot_z, loc_x, loc_y, loc_z,
        stretch``; radians and model units. A ball joint's rotation limits bound its swing
        components (x, z) and its twist (y); a hinge's its angle; a two-axis joint's its two
        angles.
    stiffness: ``{key: s}`` with s in [0, 1); the DOF's weight is 1 - s (a stiff DOF moves less).
    length: the length (model units) the joint's location and stretch DOFs are weighed in:
        moving by one ``length`` costs what turning by one radian costs (their weights are
        (1 - s) x ``length``). With a chain's length, the solve is the same whatever the rig's
        units: a rig in centimetres moves as the same rig in metres, as Blender's IK, which
        measures translations in the IK tree's length, moves it.
    """

    rotation_axes: str = "XYZ"
    location_axes: str = ""
    stretch: bool = False
    limits: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    stiffness: Mapping[str, float] = field(default_factory=dict)
    length: float = 1.0

    def __post_init__(self) -> None:
        for axes in (self.rotation_axes, self.location_axes):
            if any(a not in AXES for a in axes) or len(set(axes)) != len(axes):
                raise SkeletonError(f"axes must be distinct letters of 'XYZ', got {axes!r}")
        for key, (lo, hi) in self.limits.items():
            if key not in DOF_KEYS:
                raise SkeletonError(f"unknown limit {key!r}; expected one of {DOF_KEYS}")
            if not (lo <= hi) or np.isnan(lo) or np.isnan(hi):
                raise SkeletonError(f"limit {key!r} has min {lo} above max {hi}")
        for key, s in self.stiffness.items():
            if key not in DOF_KEYS:
                raise SkeletonError(f"unknown stiffness {key!r}; expected one of {DOF_KEYS}")
            if not 0.0 <= s < 1.0:
                raise SkeletonError(f"stiffness {key!r} must be in [0, 1), got {s}")
        if not (np.isfinite(self.length) and self.length > 0.0):
            raise SkeletonError(f"length must be positive and finite, got {self.length}")

    @classmethod
    def ball(cls, **kw: object) -> Joint:
        return cls("XYZ", **kw)  # type: ignore[arg-type]

    @classmethod
    def hinge(cls, axis: str = "X", **kw: object) -> Joint:
        return cls(axis, **kw)  # type: ignore[arg-type]

    @classmethod
    def fixed(cls) -> Joint:
        return cls("")

    @classmethod
    def free(cls, stiffness: float = 0.0, length: float = 1.0) -> Joint:
        """A free-floating root: six DOFs, a ball joint and a translation along the three axes
        of its rest frame (Blender's pose location and rotation of a root bone), all with the
        same ``stiffness`` (a reluctant root moves less than the chains), its translation
        weighed in ``length``."""
        keys = ("rot_x", "rot_y", "rot_z", "loc_x", "loc_y", "loc_z")
        stiff = {k: stiffness for k in keys} if stiffness > 0 else {}
        return cls("XYZ", location_axes="XYZ", stiffness=stiff, length=length)


@dataclass(frozen=True)
class Effector:
    """A point on a bone, in the bone's frame (head = origin; a Blender tail is (0, length, 0)).

    chain: the bones of the goal's IK chain (Blender's chain length: the goal's bone and the
        ones above it that its constraint moves), or None: every bone above it. A goal moves
        the bones of the chains of its IK tree (the goals whose chains share a bone with its
        own, transitively) that lie above it, never another tree's (``Skeleton.dof_moves``).
    """

    bone: int
    offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    name: str = ""
    chain: tuple[int, ...] | None = None


@dataclass
class Pose:
    """Joint state for F frames: rotations (F, B, 3, 3), locations (F, B, 3), stretch (F, B)."""

    rotations: Array
    locations: Array
    stretch: Array

    @classmethod
    def rest(cls, n_bones: int, frames: int = 1) -> Pose:
        rot = np.broadcast_to(np.eye(3), (frames, n_bones, 3, 3)).copy()
        return cls(rot, np.zeros((frames, n_bones, 3)), np.zeros((frames, n_bones)))

    @property
    def frames(self) -> int:
        return int(self.rotations.shape[0])

    def take(self, index: ArrayLike) -> Pose:
        idx = np.asarray(index)
        return Pose(self.rotations[idx], self.locations[idx], self.stretch[idx])

    def __getitem__(self, index: int | slice) -> Pose:
        if isinstance(index, int):
            index = slice(index, index + 1 if index != -1 else None)
        return Pose(self.rotations[index], self.locations[index], self.stretch[index])

    def copy(self) -> Pose:
        return Pose(self.rotations.copy(), self.locations.copy(), self.stretch.copy())

    def put(self, index: NDArray[np.intp], other: Pose) -> None:
        """Write ``other``'s frames into the frames at ``index``."""
        self.rotations[index] = other.rotations
        self.locations[index] = other.locations
        self.stretch[index] = other.stretch

    def of_bones(self, bones: NDArray[np.intp]) -> Pose:
        """The pose of ``bones`` only: the start of a solve on ``Skeleton.subtree``'s
        skeleton, whose bones are ``bones``."""
        return Pose(self.rotations[:, bones], self.locations[:, bones], self.stretch[:, bones])

    def put_solved(self, bones: NDArray[np.intp], solved: Array, part: Pose) -> None:
        """Write the solved bones of ``part``, a pose of ``Skeleton.subtree``'s skeleton
        (``bones``: its bones in this pose's; ``solved``: the mask of those it solves)."""
        into, out = bones[solved], np.flatnonzero(solved)
        self.rotations[:, into] = part.rotations[:, out]
        self.locations[:, into] = part.locations[:, out]
        self.stretch[:, into] = part.stretch[:, out]

    def broadcast(self, frames: int) -> Pose:
        if self.frames == frames:
            return self.copy()
        if self.frames != 1:
            raise SkeletonError(f"pose has {self.frames} frames, expected 1 or {frames}")
        return Pose(
            np.repeat(self.rotations, frames, axis=0),
            np.repeat(self.locations, frames, axis=0),
            np.repeat(self.stretch, frames, axis=0),
        )


@dataclass
class Kinematics:
    """Forward kinematics of F frames in model space."""

    rot: Array  # (F, B, 3, 3) bone frames
    pre: Array  # (F, B, 3, 3) parent' @ rest rotation: the frame of pre-rotations and location
    head: Array  # (F, B, 3) bone heads
    child: Array  # (F, B, 3) origin handed to the children (head moved by the stretch)
    points: Array  # (F, E, 3) effector points
    frames_rot: Array  # (F, E, 3, 3) effector orientations (the bone frames)

    def take(self, index: NDArray[np.intp]) -> Kinematics:
        """The frames ``index``."""
        return Kinematics(
            self.rot[index],
            self.pre[index],
            self.head[index],
            self.child[index],
            self.points[index],
            self.frames_rot[index],
        )

    def put(self, index: NDArray[np.intp], other: Kinematics) -> None:
        """Frames ``index`` set from ``other`` (in place)."""
        for name in ("rot", "pre", "head", "child", "points", "frames_rot"):
            getattr(self, name)[index] = getattr(other, name)


class Skeleton:
    """A tree of bones with joints and effectors; see the module docstring for the model.

    parents: (B,) parent index per bone, -1 for roots; parents must come before children.
    rest: (B, 4, 4) rigid rest transforms relative to the parent (roots: to model space).
    joints: one Joint per bone. effectors: the points that goals pull on.
    """

    def __init__(
        self,
        parents: Sequence[int] | ArrayLike,
        rest: ArrayLike,
        joints: Sequence[Joint],
        effectors: Sequence[Effector],
        names: Sequence[str] | None = None,
    ) -> None:
        self.parents = np.asarray(parents, dtype=np.intp).reshape(-1)
        n = len(self.parents)
        rest_arr = np.asarray(rest, dtype=float)
        if rest_arr.shape != (n, 4, 4):
            raise SkeletonError(f"rest must have shape ({n}, 4, 4), got {rest_arr.shape}")
        if not np.all(np.isfinite(rest_arr)):
            raise SkeletonError("rest matrices contain NaN or inf")
        for b, p in enumerate(self.parents):
            if not -1 <= p < b:
                raise SkeletonError(f"bone {b}: parent {p} must be -1 or an earlier bone")
        rr = rest_arr[:, :3, :3]
        if not np.allclose(rr @ np.swapaxes(rr, 1, 2), np.eye(3), atol=1e-5):
            raise SkeletonError("rest matrices must be rigid (orthonormal rotation, no scale)")
        if len(joints) != n:
            raise SkeletonError(f"{len(joints)} joints for {n} bones")
        if not effectors:
            raise SkeletonError("a skeleton needs at least one effector")
        for e in effectors:
            if not 0 <= e.bone < n:
                raise SkeletonError(f"effector {e.name or e.bone!r} names bone {e.bone}")
            if e.chain is not None and not all(0 <= b < n for b in e.chain):
                raise SkeletonError(f"effector {e.name or e.bone!r}: chain bones out of range")
            if not np.all(np.isfinite(e.offset)):
                raise SkeletonError(f"effector {e.name or e.bone!r} has a non-finite offset")
        self.names = list(names) if names is not None else [f"bone{b}" for b in range(n)]
        self.rest_rot = rr.copy()
        self.rest_pos = rest_arr[:, :3, 3].copy()
        self._rest_soa = np.ascontiguousarray(np.moveaxis(rr, 0, 2))[:, :, None, :]  # (3, 3, 1, B)
        self._rest_pos_soa = self.rest_pos.T[:, None, :]  # (3, 1, B)
        self.joints = list(joints)
        self.effectors = list(effectors)
        self.eff_bone = np.array([e.bone for e in effectors], dtype=np.intp)
        self.eff_offset = np.array([e.offset for e in effectors], dtype=float).reshape(-1, 3)
        self.eff_stretches = np.linalg.norm(self.eff_offset, axis=1) > 0.0
        self._levels = self._make_levels()
        self._compile_dofs()

    # -- construction -----------------------------------------------------------------------
    @property
    def n_bones(self) -> int:
        return len(self.parents)

    @property
    def n_effectors(self) -> int:
        return len(self.effectors)

    @property
    def n_dofs(self) -> int:
        return len(self.dof_bone)

    def _make_levels(self) -> list[tuple[NDArray[np.intp], NDArray[np.intp]]]:
        self._doubling: list[tuple[NDArray[np.intp], NDArray[np.intp]]]
        depth = np.zeros(self.n_bones, dtype=np.intp)
        for b, p in enumerate(self.parents):
            depth[b] = 0 if p < 0 else depth[p] + 1
        self.depth = depth
        levels = [
            (np.flatnonzero(depth == d), self.parents[depth == d])
            for d in range(int(depth.max()) + 1)
        ]
        self._has_parent = np.flatnonzero(self.parents >= 0)
        self._parent_of = self.parents[self._has_parent]
        self._parent_ext = np.where(self.parents >= 0, self.parents, len(self.parents))
        # pointer doubling: pass k composes bone b with its 2^k-th ancestor's partial transform
        self._doubling = []
        anc = self.parents.copy()
        while np.any(anc >= 0):
            idx = np.flatnonzero(anc >= 0)
            self._doubling.append((idx, anc[idx].copy()))
            anc[idx] = anc[anc[idx]]
        return levels

    def _compile_dofs(self) -> None:
        bone, kind, axis, key = [], [], [], []
        self.rot_kind = np.zeros(self.n_bones, dtype=np.intp)
        self.rot_axes: list[tuple[int, ...]] = []
        for b, joint in enumerate(self.joints):
            axes = tuple(sorted(AXES.index(a) for a in joint.rotation_axes))
            if len(axes) == 2:
                # R = R_p(q1) R_t(q2): the twist Y last when free, else Z last
                second = 1 if 1 in axes else 2
                axes = (next(a for a in axes if a != second), second)
            self.rot_axes.append(axes)
            self.rot_kind[b] = (KIND_NONE, KIND_HINGE, KIND_TWO, KIND_BALL)[len(axes)]
            for i, a in enumerate(axes):
                bone.append(b)
                kind.append(ROT_PRE if len(axes) == 2 and i == 0 else ROT_POST)
                axis.append(a)
                key.append(f"rot_{'xyz'[a]}")
            for a in sorted(AXES.index(c) for c in joint.location_axes):
                bone.append(b)
                kind.append(LOCATION)
                axis.append(a)
                key.append(f"loc_{'xyz'[a]}")
            if joint.stretch:
                bone.append(b)
                kind.append(STRETCH)
                axis.append(1)
                key.append("stretch")
        self.dof_bone = np.array(bone, dtype=np.intp)
        self.dof_kind = np.array(kind, dtype=np.intp)
        self.dof_axis = np.array(axis, dtype=np.intp)
        self.dof_key = key
        n = len(bone)
        self.dof_weight = np.ones(n)
        self.dof_min = np.full(n, -np.inf)
        self.dof_max = np.full(n, np.inf)
        for j in range(n):
            joint = self.joints[bone[j]]
            self.dof_weight[j] = 1.0 - joint.stiffness.get(key[j], 0.0)
            if kind[j] > ROT_POST:  # location, stretch
                self.dof_weight[j] *= joint.length
            lo, hi = joint.limits.get(key[j], (-np.inf, np.inf))
            self.dof_min[j], self.dof_max[j] = lo, hi
        self.dof_rotational = self.dof_kind <= ROT_POST
        self.dof_limited = np.isfinite(self.dof_min) | np.isfinite(self.dof_max)
        # which DOF moves which effector: its bone is the effector's bone or an ancestor
        anc = np.zeros((self.n_bones, self.n_bones), dtype=bool)  # anc[b, a]: a is b or above
        for b, p in enumerate(self.parents):
            anc[b, b] = True
            if p >= 0:
                anc[b] |= anc[p]
        moves = anc[self.eff_bone][:, self.dof_bone]  # (E, n)
        same = self.eff_bone[:, None] == self.dof_bone[None, :]
        # a stretch moves the tail and children, not a point at the bone's own head
        moves &= ~(same & (self.dof_kind == STRETCH)[None, :] & ~self.eff_stretches[:, None])
        self.dof_affects = moves.copy()  # the DOFs that move each effector's point
        self.dof_moves = moves & self._tree_bones()[:, self.dof_bone]  # the ones its IK uses
        self._pair_eff, self._pair_dof = np.nonzero(self.dof_moves)
        self._pair_rot = self.dof_rotational[self._pair_dof]
        self._pairs_every = np.nonzero(self.dof_affects)

    def _tree_bones(self) -> NDArray[np.bool_]:
        """(E, B): the bones of the chains of each effector's IK tree (every bone for an
        effector whose chain is None): effectors whose chains share a bone, transitively."""
        e, n = self.n_effectors, self.n_bones
        chains = np.ones((e, n), dtype=bool)
        for i, eff in enumerate(self.effectors):
            if eff.chain is not None:
                chains[i] = False
                chains[i, list(eff.chain)] = True
        if chains.all():
            return chains
        label = components((chains.astype(np.int64) @ chains.T.astype(np.int64)) > 0)
        union = np.zeros((e, n), dtype=bool)
        for t in np.unique(label):
            union[label == t] = chains[label == t].any(axis=0)
        return union

    def subtree(self, effectors: NDArray[np.intp]) -> tuple[Skeleton, NDArray[np.intp], Array]:
        """The skeleton of one IK tree: the bones on the paths from the roots to ``effectors``
        (and only those effectors), with the joints of the bones whose DOFs move them and every
        other bone fixed (its pose still applies). Returns (skeleton, the bones it keeps as
        indices of this skeleton, a mask over them of the bones it solves). Cached."""
        key = tuple(int(e) for e in effectors)
        cache: dict[tuple[int, ...], tuple[Skeleton, NDArray[np.intp], Array]]
        cache = self.__dict__.setdefault("_subtrees", {})
        if key in cache:
            return cache[key]
        solved = set(self.dof_bone[self.dof_moves[list(key)].any(axis=0)].tolist())
        keep = np.zeros(self.n_bones, dtype=bool)
        for e in key:
            b = int(self.eff_bone[e])
            while b >= 0 and not keep[b]:
                keep[b] = True
                b = int(self.parents[b])
        bones = np.flatnonzero(keep)
        index = np.full(self.n_bones, -1, dtype=np.intp)
        index[bones] = np.arange(len(bones))
        rest = np.zeros((len(bones), 4, 4))
        rest[:, :3, :3], rest[:, :3, 3], rest[:, 3, 3] = (
            self.rest_rot[bones],
            self.rest_pos[bones],
            1,
        )
        sub = Skeleton(
            [int(index[p]) if p >= 0 else -1 for p in self.parents[bones]],
            rest,
            [self.joints[b] if b in solved else Joint.fixed() for b in bones],
            [
                Effector(
                    int(index[self.eff_bone[e]]),
                    (
                        float(self.eff_offset[e, 0]),
                        float(self.eff_offset[e, 1]),
                        float(self.eff_offset[e, 2]),
                    ),
                    self.effectors[e].name,
                    _sub_chain(self.effectors[e].chain, index),
                )
                for e in key
            ],
            [self.names[b] for b in bones],
        )
        mask = np.array([b in solved for b in bones])
        cache[key] = (sub, bones, mask)
        return cache[key]

    def chain_reach(self) -> tuple[Array, NDArray[np.intp], Array]:
        """Per effector: (reach, base bone, inner reach) of its chain.

        The base is the top-most bone with a DOF that moves the effector (its head stays put
        while the chain moves); reach is the length of the path from that head to the effector
        point (the chain held straight), inner the shortest distance it can fold to
        (2 x the longest segment - reach, at least 0). A chain with a location or stretch DOF
        has an unbounded reach. Cached.
        """
        cached = self.__dict__.get("_chain_reach")
        if cached is not None:
            return cached
        self.__dict__["_chain_reach"] = out = self._chain_reach()
        return out

    def _chain_reach(self) -> tuple[Array, NDArray[np.intp], Array]:
        e = self.n_effectors
        reach, inner = np.zeros(e), np.zeros(e)
        base = np.zeros(e, dtype=np.intp)
        for i in range(e):
            moving = set(self.dof_bone[self.dof_moves[i]].tolist())
            path, b = [], int(self.eff_bone[i])
            while b >= 0:
                path.append(b)
                b = int(self.parents[b])
            chain = [b for b in path if b in moving]
            if not chain:
                base[i], reach[i] = self.eff_bone[i], 0.0
                continue
            top = path.index(chain[-1])
            base[i] = path[top]
            segments = [float(np.linalg.norm(self.rest_pos[b])) for b in path[:top]]
            segments.append(float(np.linalg.norm(self.eff_offset[i])))
            reach[i] = sum(segments)
            inner[i] = max(0.0, 2.0 * max(segments) - reach[i])
            kinds = self.dof_kind[self.dof_moves[i]]
            if np.any((kinds == LOCATION) | (kinds == STRETCH)):
                reach[i], inner[i] = np.inf, 0.0
        return reach, base, inner

    # -- kinematics -------------------------------------------------------------------------
    def forward_kinematics(self, pose: Pose) -> Kinematics:
        """Model-space frames of every bone, by pointer doubling over the tree: each pass
        composes every bone's transform with its ancestor's, doubling the levels covered, so
        a tree of depth d takes ceil(log2(d + 1)) passes.

        The products run on "structure of arrays" (3, 3, F, B) views: numpy's stacked
        matmul costs about 0.1 us per 3x3 product, three broadcast multiply-adds a quarter
        of that.
        """
        f, nb = pose.frames, self.n_bones
        rot_l = pose.rotations.transpose(2, 3, 0, 1)  # (3, 3, F, B) view
        rest = self._rest_soa
        # local transform relative to the parent frame: T(s_parent e_y) rest T(location) R;
        # slot nb holds the identity: the parent frame of the roots
        rot = np.empty((3, 3, f, nb + 1))
        rot[..., nb] = np.eye(3)[:, :, None]
        rot[..., :nb] = _compose(rest, rot_l)
        pos = np.zeros((3, f, nb + 1))
        pos[..., :nb] = self._rest_pos_soa + _rotate(rest, pose.locations.transpose(2, 0, 1))
        pos[1][:, self._has_parent] += pose.stretch[:, self._parent_of]
        for idx, anc in self._doubling:
            arot = rot[..., anc]
            pos[..., idx] = pos[..., anc] + _rotate(arot, pos[..., idx])
            rot[..., idx] = _compose(arot, rot[..., idx])
        pre = _compose(rot[..., self._parent_ext], rest)
        rot_aos = rot[..., :nb].transpose(2, 3, 0, 1)
        pre_aos = pre.transpose(2, 3, 0, 1)
        head = pos[..., :nb].transpose(1, 2, 0)
        child = head + pose.stretch[..., None] * rot_aos[..., :, 1]
        erot = rot_aos[:, self.eff_bone]
        origin = np.where(
            self.eff_stretches[None, :, None], child[:, self.eff_bone], head[:, self.eff_bone]
        )
        points = origin + rotate(erot, self.eff_offset)
        return Kinematics(rot_aos, pre_aos, head, child, points, erot)

    def forward(self, pose: Pose) -> Array:
        """Model-space 4x4 bone frames, (F, B, 4, 4)."""
        kin = self.forward_kinematics(pose)
        out = np.zeros((pose.frames, self.n_bones, 4, 4))
        out[..., :3, :3] = kin.rot
        out[..., :3, 3] = kin.head
        out[..., 3, 3] = 1.0
        return out

    def dof_axes(self, kin: Kinematics) -> Array:
        """(F, n, 3) model-space direction of every DOF's rotation axis or translation."""
        use_pre = (self.dof_kind == ROT_PRE) | (self.dof_kind == LOCATION)
        frames = np.where(
            use_pre[None, :, None, None], kin.pre[:, self.dof_bone], kin.rot[:, self.dof_bone]
        )
        columns = np.swapaxes(frames, 2, 3)  # (F, n, column, 3)
        return columns[:, np.arange(self.n_dofs), self.dof_axis]

    def jacobian(self, kin: Kinematics, points: Array | None = None, every: bool = False) -> Array:
        """Model-space Jacobian (F, E, 6, n): rows 0-2 position, 3-5 orientation of each effector.

        ``points`` (F, E, 3) replaces the effector points in the position rows (Buss 2009:
        the Jacobian formed at the target positions). The columns of each goal are the DOFs its
        IK uses (``dof_moves``); ``every``: every DOF that moves its point (``dof_affects``).
        """
        f, e, n = kin.points.shape[0], self.n_effectors, self.n_dofs
        pts = kin.points if points is None else points
        axes = self.dof_axes(kin)
        pe, pd, prot = self._pair_eff, self._pair_dof, self._pair_rot
        if every:
            pe, pd = self._pairs_every
            prot = self.dof_rotational[pd]
        ax = axes[:, pd]  # (F, P, 3)
        lever = pts[:, pe] - kin.head[:, self.dof_bone[pd]]
        pos = np.where(prot[None, :, None], _cross(ax, lever), ax)
        out = np.zeros((f, e, n, 6))
        out[:, pe, pd, :3] = pos
        out[:, pe, pd, 3:] = ax * prot[None, :, None]
        return np.swapaxes(out, 2, 3)

    # -- updates and limits -----------------------------------------------------------------
    def apply(self, pose: Pose, dq: Array) -> Pose:
        """The pose after the DOF increments dq (F, n): R <- exp(d_pre) R exp(d_post)."""
        f, b = pose.frames, self.n_bones
        bone, kind, axis = self.dof_bone, self.dof_kind, self.dof_axis
        d = np.zeros((4, f, b, 3))
        d[kind, :, bone, axis] = dq.T  # each DOF is a distinct (kind, bone, axis)
        rot = pose.rotations
        if np.any(kind == ROT_POST):
            rot = mul(rot, exp_so3(d[ROT_POST]))
        if np.any(kind == ROT_PRE):
            rot = mul(exp_so3(d[ROT_PRE]), rot)
        return Pose(rot, pose.locations + d[LOCATION], pose.stretch + d[STRETCH][..., 1])

    def coordinates(self, pose: Pose, limited: bool = False) -> Array:
        """(F, n) the coordinate of every DOF that limits apply to (see Joint.limits); with
        ``limited`` only those of the limited DOFs (the others 0: what ``violations`` needs,
        without the swing-twist of every bone on a rig whose limits are a few stretches)."""
        f = pose.frames
        out = np.zeros((f, self.n_dofs))
        dofs = np.flatnonzero(self.dof_limited) if limited else range(self.n_dofs)
        turns = self.dof_limited & (self.dof_kind <= ROT_POST)
        bones = np.unique(self.dof_bone[turns]) if limited else range(self.n_bones)
        rot_coords = self._rotation_coordinates(pose.rotations, bones)  # (F, B, 3) by axis
        for j in dofs:
            b, k, a = self.dof_bone[j], self.dof_kind[j], self.dof_axis[j]
            if k <= ROT_POST:
                out[:, j] = rot_coords[:, b, a]
            elif k == LOCATION:
                out[:, j] = pose.locations[:, b, a]
            else:
                out[:, j] = pose.stretch[:, b]
        return out

    def _rotation_coordinates(self, rot: Array, bones: Iterable[int] | None = None) -> Array:
        out = np.zeros((*rot.shape[:2], 3))
        for b in range(self.n_bones) if bones is None else bones:
            if self.rot_kind[b] != KIND_NONE:
                out[:, b] = self._bone_coordinates(b, rot[:, b])
        return out

    def _bone_coordinates(self, b: int, rot: Array) -> Array:
        """(k, 3) limit coordinates by axis of bone b's rotations (k, 3, 3)."""
        kind, axes = self.rot_kind[b], self.rot_axes[b]
        out = np.zeros((len(rot), 3))
        if kind == KIND_BALL:
            out[:] = swing_twist(rot)
        elif kind == KIND_HINGE:
            out[:, axes[0]] = hinge_angle(rot, axes[0])
        elif kind == KIND_TWO:
            out[:, axes[0]], out[:, axes[1]] = two_axis_angles(rot, *axes)
        return out

    def set_coordinates(
        self, pose: Pose, frames: NDArray[np.intp], dofs: NDArray[np.intp], values: Array
    ) -> None:
        """Set the limit coordinates ``values`` of DOFs ``dofs`` in frames ``frames`` (in place)."""
        for b in np.unique(self.dof_bone[dofs]):
            sel = self.dof_bone[dofs] == b
            fr = frames[sel]
            kinds = self.dof_kind[dofs[sel]]
            axes = self.dof_axis[dofs[sel]]
            vals = values[sel]
            if np.any(kinds <= ROT_POST):
                rsel = kinds <= ROT_POST
                frs = np.unique(fr[rsel])
                coords = self._bone_coordinates(b, pose.rotations[frs, b])  # (k, 3)
                where = np.searchsorted(frs, fr[rsel])
                coords[where, axes[rsel]] = vals[rsel]
                pose.rotations[frs, b] = self._rotation_from_coordinates(b, coords)
            lsel = kinds == LOCATION
            pose.locations[fr[lsel], b, axes[lsel]] = vals[lsel]
            ssel = kinds == STRETCH
            pose.stretch[fr[ssel], b] = vals[ssel]

    def _rotation_from_coordinates(self, b: int, c: Array) -> Array:
        kind, axes = self.rot_kind[b], self.rot_axes[b]
        if kind == KIND_BALL:
            swing = c * np.array([1.0, 0.0, 1.0])
            # a swing is at most pi: pull longer ones toward 0 (inside any limit box around 0)
            norm = np.linalg.norm(swing, axis=1, keepdims=True)
            swing *= np.minimum(1.0, (np.pi - 1e-9) / np.maximum(norm, 1e-300))
            twist = np.zeros_like(c)
            twist[:, 1] = c[:, 1]
            return exp_so3(swing) @ exp_so3(twist)
        out = np.broadcast_to(np.eye(3), (len(c), 3, 3)).copy()
        for a in axes:
            v = np.zeros_like(c)
            v[:, a] = c[:, a]
            out = out @ exp_so3(v)
        return out

    def violations(self, coords: Array) -> NDArray[np.bool_]:
        """(F, n) which of the limit coordinates ``coords`` (``coordinates``) are outside
        their DOF's range by more than rounding."""
        return np.asarray((coords < self.dof_min - 1e-12) | (coords > self.dof_max + 1e-12))

    def clamp_to_limits(self, pose: Pose) -> NDArray[np.bool_]:
        """Clamp every limited DOF into its range (in place); returns the (F, n) violations."""
        return np.asarray(self.clamp_sides(pose) != 0)

    def clamp_sides(self, pose: Pose) -> NDArray[np.int8]:
        """``clamp_to_limits``, the violations as (F, n) -1 (below the min), +1 (above the max),
        0 (within)."""
        if not np.any(self.dof_limited):
            return np.zeros((pose.frames, self.n_dofs), dtype=np.int8)
        coords = self.coordinates(pose, limited=True)
        below = coords < self.dof_min - 1e-12  # (``violations``)
        over = below | (coords > self.dof_max + 1e-12)
        if np.any(over):
            fr, dof = np.nonzero(over)
            vals = np.clip(coords[fr, dof], self.dof_min[dof], self.dof_max[dof])
            self.set_coordinates(pose, fr, dof, vals)
        return np.where(below, -1, over.astype(np.int8)).astype(np.int8)

    def rest_offsets(self, pose: Pose, rest_pose: Pose | None = None) -> Array:
        """(F, n) each DOF's displacement from the rest pose (log map for rotations)."""
        rot = pose.rotations
        loc, st = pose.locations, pose.stretch
        if rest_pose is not None:
            rot = np.swapaxes(rest_pose.rotations, -1, -2) @ rot
            loc = loc - rest_pose.locations
            st = st - rest_pose.stretch
        log = angle_axis(rot)  # (F, B, 3): the same vector in the pre and post frames
        out = np.where(
            self.dof_rotational[None, :],
            log[:, self.dof_bone, self.dof_axis],
            np.where(
                (self.dof_kind == LOCATION)[None, :],
                loc[:, self.dof_bone, self.dof_axis],
                st[:, self.dof_bone],
            ),
        )
        return np.asarray(out)


def components(link: NDArray[np.bool_]) -> NDArray[np.intp]:
    """Per node of a symmetric (N, N) link matrix, the smallest node of its connected part."""
    n = link.shape[0]
    link = link | np.eye(n, dtype=bool)
    label = np.arange(n)
    while True:  # each node takes the smallest label among its neighbours, to a fixpoint
        new = np.where(link, label[None, :], n).min(axis=1)
        if np.array_equal(new, label):
            return label
        label = new


def _compose(a: Array, b: Array) -> Array:
    """Products a @ b of rotation stacks stored as (3, 3, ...)."""
    return np.asarray(
        a[:, 0, None] * b[None, 0] + a[:, 1, None] * b[None, 1] + a[:, 2, None] * b[None, 2]
    )


def _rotate(a: Array, v: Array) -> Array:
    """Products a @ v of (3, 3, ...) rotations and (3, ...) vectors."""
    return np.asarray(a[:, 0] * v[0] + a[:, 1] * v[1] + a[:, 2] * v[2])


def _cross(a: Array, b: Array) -> Array:
    """Cross products of the last axes (np.cross without its axis bookkeeping)."""
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    out[..., 0] = a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1]
    out[..., 1] = a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2]
    out[..., 2] = a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    return out


def hinge_angle(rot: Array, axis: int) -> Array:
    """The angle of rotations about one basis axis, in (-pi, pi]."""
    i, j = (axis + 1) % 3, (axis + 2) % 3
    return np.asarray(np.arctan2(rot[..., j, i], rot[..., i, i]))


def two_axis_angles(rot: Array, first: int, second: int) -> tuple[Array, Array]:
    """(q1, q2) of R = R_first(q1) R_second(q2) for two distinct basis axes."""
    a1 = np.eye(3)[first]
    a2 = np.eye(3)[second]
    u = rot[..., :, second]  # R a2 = R_first(q1) a2
    q1 = np.arctan2(u @ np.cross(a1, a2), u @ a2)
    v = np.zeros((*np.shape(q1), 3))
    v[..., first] = -q1
    rest = exp_so3(v) @ rot
    return np.asarray(q1), hinge_angle(rest, second)


def swing_twist(rot: Array) -> Array:
    """(sx, ty, sz): R = exp([sx, 0, sz]) Ry(ty), the swing-twist split about the bone's Y axis."""
    y = rot[..., :, 1]
    axis = np.stack([y[..., 2], np.zeros_like(y[..., 0]), -y[..., 0]], axis=-1)
    sin_a = np.linalg.norm(axis, axis=-1)
    angle = np.arctan2(sin_a, y[..., 1])
    unit = np.where(
        sin_a[..., None] > 1e-12, axis / np.maximum(sin_a, 1e-300)[..., None], [1.0, 0, 0]
    )
    swing = angle[..., None] * unit
    twist = np.swapaxes(exp_so3(swing), -1, -2) @ rot
    out = swing.copy()
    out[..., 1] = hinge_angle(twist, 1)
    return out


NONE, UPSTREAM, DOWNSTREAM, SAME = 0, 1, 2, 3
"""``dof_order(skel)[a, b]``: unrelated, a acts upstream of b, b upstream of a, one rotation."""


def dof_order(skel: Skeleton) -> NDArray[np.int8]:
    """(n, n) how two rotational DOFs act on each other's effectors (see the module doc),
    kept on the skeleton."""
    cached = skel.__dict__.get("_dof_order")
    if cached is not None:
        return np.asarray(cached)
    nb = skel.n_bones
    ancestor = np.zeros((nb, nb), dtype=bool)  # ancestor[p, b]: p is a proper ancestor of b
    for b in range(nb):
        p = skel.parents[b]
        while p >= 0:
            ancestor[p, b] = True
            p = skel.parents[p]
    bone, kind = skel.dof_bone, skel.dof_kind
    rotational = (kind == ROT_PRE) | (kind == ROT_POST)
    same_bone = bone[:, None] == bone[None, :]
    up = ancestor[bone][:, bone] | (
        same_bone & (kind[:, None] == ROT_PRE) & (kind[None, :] == ROT_POST)
    )
    out = np.where(up, UPSTREAM, np.where(up.T, DOWNSTREAM, NONE))
    out = np.where(same_bone & (kind[:, None] == kind[None, :]), SAME, out)
    out[~rotational] = NONE
    out[:, ~rotational] = NONE
    result = out.astype(np.int8)
    skel.__dict__["_dof_order"] = result
    return result


def _sub_chain(chain: tuple[int, ...] | None, index: NDArray[np.intp]) -> tuple[int, ...] | None:
    """An effector's own chain on a subtree's bones (``index``: each bone's index there, -1 when
    it is not kept; a chain's bones lie above its effector, so they are kept). Its own, not its
    tree's: the tree's bones follow from the chains of the effectors kept (a whole IK tree moves
    what it moved before), and one goal alone on its subtree moves its own chain only
    (solvers/priority.py)."""
    if chain is None:
        return None
    return tuple(int(index[b]) for b in chain if index[b] >= 0)
