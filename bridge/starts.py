"""Baking again gives the same keys: a bake remembers where its solves started.

A bake starts each frame from the chain bones' animated pose (their channels as read at that
frame, ``rig.read_frames``). Once baked, those channels hold the bake's own keys, so a second
bake of the same range started from the first one's result and ended elsewhere: solves stop
within a tolerance, and where goals conflict or leave reach anywhere in a set of poses with the
same errors, and the flip repair and the smoothing then move them again (on a 20-bone humanoid,
bones up to 0.49 m apart between two bakes of the same file, and still 0.13 m after the
fourth). A bake's keys would depend on how often it had been baked before.

So a bake keeps, in the action it keys (an ID property, ``KEY``), per chain bone the rotations
its frames started from (and the locations of a root it moves, ``move_root``), the seed its keys
were made continuous with, and a digest of the keys it wrote. The next bake uses them in place
of what it reads wherever the bone's keys are still exactly those (``Recalled``): a bake's keys
depend on the animation before any bake, the targets and the settings, not on earlier bakes. A
bone whose baked keys were edited since (by hand, by Live, by a Solve that keyed) starts from
its channels again, as do frames no bake covered.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..solvers import Pose
from .write import channel_path, object_fcurves, rotation_attr

Array = NDArray[np.float64]

KEY = "_jacobian_ik_starts"  # (a leading underscore: not shown among custom properties)
MAX_VALUES = 2_000_000
"""The most values a bake keeps (per bone its frames and 9 per distinct start rotation: a bone
whose start does not move keeps one); a longer bake of animated chains is not remembered."""


def _slot_key(ob: Any) -> str:
    """The record's key for ``ob``'s slot of its action ("" without slots, Blender 4.2-4.3)."""
    slot = getattr(ob.animation_data, "action_slot", None)
    return "" if slot is None else str(slot.identifier)


def _digests(ob: Any, spans: dict[str, tuple[tuple[str, ...], float, float]]) -> dict[str, str]:
    """Per bone of ``spans`` (bone: the properties the bake keyed, first and last frame), a
    digest of their F-curves' keys inside [first, last] (frames and values), curve by curve."""
    curves: dict[str, list[Any]] = {}
    for fc in object_fcurves(ob):
        curves.setdefault(fc.data_path, []).append(fc)
    out = {}
    for bone, (attrs, first, last) in spans.items():
        h = hashlib.blake2b(digest_size=16)
        keyed = [fc for attr in attrs for fc in curves.get(channel_path(bone, attr), [])]
        for fc in sorted(keyed, key=lambda c: (c.data_path, c.array_index)):
            co = np.empty(2 * len(fc.keyframe_points), dtype=np.float32)
            fc.keyframe_points.foreach_get("co", co)
            inside = np.repeat((co[0::2] >= first - 1e-3) & (co[0::2] <= last + 1e-3), 2)
            h.update(fc.array_index.to_bytes(4, "little"))
            h.update(co[inside].tobytes())
        out[bone] = h.hexdigest()
    return out


@dataclass
class _Bone:
    """One bone's record: its start rotations (and, for a root the bake moves, locations) by
    frame and its seed."""

    frames: NDArray[np.int64]  # (N,) sorted
    rotations: Array  # (N, 3, 3)
    locations: Array | None  # (N, 3)
    seed: Array


@dataclass
class Recalled:
    """The records of an armature's action that still hold (``load``): per bone name."""

    bones: dict[str, _Bone] = field(default_factory=dict)

    @classmethod
    def load(cls, ob: Any, names: list[str]) -> Recalled:
        """The records of ``names`` whose keys are unchanged since the bake that wrote them."""
        out = cls()
        ad = ob.animation_data
        action = ad.action if ad is not None else None
        store = action.get(KEY) if action is not None else None
        slot = store.get(_slot_key(ob)) if store is not None else None
        if slot is None:
            return out
        pbones = ob.pose.bones
        found = {}
        for name in names:
            rec = slot.get(name)
            pb = pbones.get(name)
            if rec is not None and pb is not None and rec["mode"] == pb.rotation_mode:
                found[name] = rec
        spans = {name: _span(rec) for name, rec in found.items() if len(rec["frames"])}
        digests = _digests(ob, spans)
        for name in spans:
            rec = found[name]
            if rec["digest"] != digests[name]:
                continue  # its keys were changed since
            rows = np.asarray(rec["rows"], dtype=np.intp)
            table = np.asarray(rec["starts"], dtype=np.float64).reshape(-1, rec["width"])
            frames = np.asarray(rec["frames"], dtype=np.int64)
            seed = np.asarray(rec["seed"], dtype=np.float64)
            moved = table[rows, 9:] if rec["width"] == 12 else None
            out.bones[name] = _Bone(frames, table[rows, :9].reshape(-1, 3, 3), moved, seed)
        return out

    def apply(self, names: list[str], bones: list[int], frames: list[int], pose: Pose) -> None:
        """In place: the start pose (F frames) of bones ``names`` (at ``bones``) at ``frames``
        from the records, where a record covers the frame."""
        want = np.asarray(frames, dtype=np.int64)
        for name, b in zip(names, bones, strict=True):
            rec = self.bones.get(name)
            if rec is None:
                continue
            at = np.clip(np.searchsorted(rec.frames, want), 0, len(rec.frames) - 1)
            hit = rec.frames[at] == want
            pose.rotations[hit, b] = rec.rotations[at[hit]]
            if rec.locations is not None:
                pose.locations[hit, b] = rec.locations[at[hit]]

    def seeds(self, names: list[str], seeds: list[Array]) -> list[Array]:
        """The continuity seeds: the recorded bake's where a bone has a record."""
        return [
            self.bones[n].seed if n in self.bones else s for n, s in zip(names, seeds, strict=True)
        ]


def _span(rec: Any) -> tuple[tuple[str, ...], float, float]:
    """What a record's digest covers: the properties keyed, first and last frame."""
    attrs = (rotation_attr(rec["mode"]),) + (("location",) if rec["width"] == 12 else ())
    return attrs, rec["frames"][0], rec["frames"][-1]


def record(
    ob: Any,
    recalled: Recalled,
    names: list[str],
    frames: list[int],
    started: Pose,
    seeds: list[Array],
    located: set[str],
) -> None:
    """After a bake keyed bones ``names`` at ``frames`` into ``ob``'s action: keep the start
    pose (F, K) it used (rotations; locations of the bones in ``located``, whose location it
    keyed: a root the bake moves) and seeds, merged with the frames of earlier records that
    still held (``recalled``) outside this bake's range, and the digests of the keys now."""
    action = ob.animation_data.action
    store = action.get(KEY)
    entries = {} if store is None else store.to_dict()
    slot: dict[str, Any] = entries.setdefault(_slot_key(ob), {})
    new = np.asarray(frames, dtype=np.int64)
    pbones = ob.pose.bones
    records: dict[str, dict[str, Any]] = {}
    total = 0
    for k, name in enumerate(names):
        f, r = new, started.rotations[:, k].reshape(len(new), 9)
        if name in located:
            r = np.concatenate([r, started.locations[:, k]], axis=1)
        old = recalled.bones.get(name)
        if old is not None:  # the earlier bake's frames outside this range
            out = ~np.isin(old.frames, new)
            was = old.rotations[out].reshape(-1, 9)
            if old.locations is not None:
                was = np.concatenate([was, old.locations[out]], axis=1)
            if was.shape[1] == r.shape[1]:
                f, r = np.concatenate([old.frames[out], f]), np.concatenate([was, r])
        order = np.argsort(f, kind="stable")
        f, flat = f[order], r[order]
        # runs of equal starts kept once (a bone that does not move before the bake: one)
        step = np.concatenate([[True], np.any(flat[1:] != flat[:-1], axis=1)])
        table, rows = flat[step], np.cumsum(step) - 1
        total += table.size + f.size
        records[name] = {
            "mode": pbones[name].rotation_mode,
            "frames": f.tolist(),
            "rows": rows.tolist(),
            "width": flat.shape[1],
            "starts": table.ravel().tolist(),
            "seed": np.asarray(seeds[k], dtype=np.float64).tolist(),
        }
    if total > MAX_VALUES:  # too long to keep: later bakes start from the keys
        records = {}
    spans = {name: _span(rec) for name, rec in records.items()}
    for name, digest in _digests(ob, spans).items():
        records[name]["digest"] = digest
    for name in names:
        slot.pop(name, None)
    slot.update(records)
    action[KEY] = entries
