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
from .write import Seeds, channel_path, object_fcurves, rotation_attr

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
        slot = _slot(ob)
        pbones = ob.pose.bones
        found = {}
        for name in names:
            rec: Any = slot.get(name) if slot is not None else None
            pb = pbones.get(name)
            bone = _parse(rec) if rec is not None and pb is not None else None
            if bone is not None and rec.get("mode") == pb.rotation_mode:
                found[name] = (rec, bone)
        spans = {name: _span(rec, bone.frames) for name, (rec, bone) in found.items()}
        digests = _digests(ob, spans)
        kept = {n: bone for n, (rec, bone) in found.items() if rec.get("digest") == digests[n]}
        return cls(kept)  # (the others' keys were changed since)

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

    def seeds(self, names: list[str], seeds: Seeds) -> list[Array]:
        """The continuity seeds: the recorded bake's where a bone has a record."""
        return [
            self.bones[n].seed if n in self.bones else s for n, s in zip(names, seeds, strict=True)
        ]


def _slot(ob: Any) -> Any:
    """The records of ``ob``'s slot in its action (an ID property group), or None."""
    ad = ob.animation_data
    action = ad.action if ad is not None else None
    store: Any = action.get(KEY) if action is not None else None
    slot: Any = store.get(_slot_key(ob)) if hasattr(store, "get") else None
    return slot if hasattr(slot, "get") else None


def _parse(rec: Any) -> _Bone | None:
    """A record as arrays; None when it is not one a bake wrote (edited, or damaged)."""
    try:
        width = int(rec["width"])
        frames = np.asarray(rec["frames"], dtype=np.int64)
        rows = np.asarray(rec["rows"], dtype=np.intp)
        table = np.asarray(rec["starts"], dtype=np.float64).reshape(-1, width)
        seed = np.asarray(rec["seed"], dtype=np.float64)
    except (KeyError, TypeError, ValueError):
        return None
    if width not in (9, 12) or frames.ndim != 1 or frames.size == 0 or rows.shape != frames.shape:
        return None
    if rows.min() < 0 or rows.max() >= len(table) or np.any(np.diff(frames) <= 0):
        return None
    if not (np.all(np.isfinite(table)) and np.all(np.isfinite(seed))):
        return None
    moved = table[rows, 9:] if width == 12 else None
    return _Bone(frames, table[rows, :9].reshape(-1, 3, 3), moved, seed)


def _span(rec: Any, frames: NDArray[np.int64]) -> tuple[tuple[str, ...], float, float]:
    """What a record's digest covers: the properties keyed, first and last frame."""
    attrs = (rotation_attr(rec["mode"]),) + (("location",) if rec["width"] == 12 else ())
    return attrs, float(frames[0]), float(frames[-1])


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
    entries = store.to_dict() if hasattr(store, "to_dict") else {}
    slot = entries.get(_slot_key(ob))
    if not isinstance(slot, dict):
        slot = entries[_slot_key(ob)] = {}
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
    spans = {name: _span(rec, np.asarray(rec["frames"])) for name, rec in records.items()}
    for name, digest in _digests(ob, spans).items():
        records[name]["digest"] = digest
    for name in names:
        slot.pop(name, None)
    slot.update(records)
    action[KEY] = entries
