"""Buss and Kim (2005), section 5, on the Y and double-Y shapes of buss-kim-shapes.json.

- Tracking (Fig. 3): ``solve(mode="track")``, one step per time step, 400 warm-up and 2000
  measured steps; per step, how many effectors are closer to their targets with SDLS than with
  the other method (0..n), as a histogram.
- Convergence (Fig. 4): targets jump (T advances by 3 (1 + sqrt 5) between trials) and every
  method iterates from the configuration it reached on the previous trial until (i) the total
  distance (sum over effectors, as the demo's UpdateErrorArray) improves by less than 1e-5 in a
  step, (ii) it has increased in three steps, or (iii) 4000 steps. These stop rules and the
  per-trial reset of the adaptive clamp are not ``solve`` options, so the trials run in a small
  driver (``ConvergenceDriver``) that calls the methods' own step (``solvers.make_method``) and
  the skeleton's kinematics exactly as ``solve``'s loop does; a smoke test checks that it
  reproduces ``solve(mode="track")`` step for step. Independent streams of trials (each its
  own sequence of jumps from its own start time) run batched as frames.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jacobian_ik.solvers import Goals, Pose, Settings, Skeleton, make_method, solve
from jacobian_ik.solvers.methods import StepContext, clamp_max_abs
from tests.rigs.skeletons import buss_kim, buss_kim_targets, load_shapes

DEG = math.pi / 180
CONST = load_shapes()["constants"]
TSTEP = float(CONST["Tstep"])
JUMP = 3.0 * (1.0 + math.sqrt(5.0))
D_MAX = float(CONST["demo_defaults"]["clamp_base_max_target_dist"])  # 0.4


@dataclass(frozen=True)
class Variant:
    """A row of the paper's tables as solver settings."""

    label: str
    method: str
    params: dict[str, Any] = field(default_factory=dict)
    clamp: bool = False  # ClampMag with the adaptive D_max,i = d_i + D_MAX (section 3)
    max_step: float | None = None  # the demo's MaxAngle (ClampMaxAbs of the step)
    jacobian_at_targets: bool = False

    def settings(self, **kw: Any) -> Settings:
        return Settings(
            method=self.method,
            params=self.params,
            clamp_distance=D_MAX if self.clamp else None,
            clamp_adaptive=self.clamp,
            max_step=self.max_step,
            jacobian_at_targets=self.jacobian_at_targets,
            **kw,
        )


def variants(shape: str) -> dict[str, Variant]:
    """The paper's methods with the demo's constants; DLS* is, as the paper says under Fig. 4,
    "the DLS' method but with the damping constant 1.1 of the DLS method". The Y shape uses the
    demo's lambda 0.6 for DLS and DLS' (the paper gives no Y figures)."""
    lam, lam_clamped = (1.1, 0.7) if shape == "double_y_shape" else (0.6, 0.6)
    return {
        "SDLS": Variant("SDLS", "sdls", {"gamma_max": 45 * DEG}, clamp=True),
        "DLS": Variant("DLS", "dls", {"damping": lam}, max_step=45 * DEG),
        "DLS'": Variant("DLS'", "dls", {"damping": lam_clamped}, clamp=True, max_step=45 * DEG),
        "DLS*": Variant("DLS*", "dls", {"damping": lam}, clamp=True, max_step=45 * DEG),
        "J^T": Variant("J^T", "transpose", max_step=30 * DEG),
        "LM (ours)": Variant("LM (ours)", "lm", {"w_bar": 1e-3}),
        "Deo-Walker (ours)": Variant("Deo-Walker (ours)", "dls_optimal", {"max_norm": 45 * DEG}),
    }


PAPER_METHODS = ("SDLS", "DLS", "DLS'", "DLS*", "J^T")

PAPER_FIG4 = {
    "reachable": {
        "SDLS": (2972, 0.0, 39.3, 48.7, 52.2, 53.5),
        "DLS": (0, 0.00015, 61.5, 231.6, 467.1, 635.2),
        "DLS'": (0, 0.00007, 29.7, 110.9, 228.3, 327.2),
        "DLS*": (0, 0.00015, 63.3, 222.9, 448.0, 609.4),
        "J^T": (0, 2.362, 44.0, 51.6, 53.4, 53.9),
    },
    "unreachable": {
        "SDLS": (940, 0.182, 173.5, 336.0, 548.1, 686.0),
        "DLS": (52, 0.106, 116.1, 448.9, 1166.7, 1706.2),
        "DLS'": (6097, 0.00011, 75.2, float("nan"), 863.6, 1289.5),
    },
}
PAPER_FIG3 = {"SDLS vs DLS'": (9.3, 24.3, 32.9, 20.0, 13.6)}
LEVELS = (0.1, 0.01, 0.001, 0.0001)


# -- tracking (Fig. 3) ------------------------------------------------------------------------


def tracking(
    shape: str = "double_y_shape", warmup: int = 400, measured: int = 2000
) -> dict[str, Any]:
    """Per-effector distances over the measured steps for every variant, and the Fig. 3
    histograms of SDLS against DLS and DLS' (share of steps with n effectors closer with SDLS)."""
    skel = buss_kim(shape)
    times = TSTEP * np.arange(1, warmup + measured + 1)
    goals = Goals(buss_kim_targets(shape, times))
    dist: dict[str, np.ndarray] = {}
    for name, v in variants(shape).items():
        res = solve(skel, goals, v.settings(mode="track", track_steps=1))
        dist[name] = res.position_error[warmup:]
    hist = {}
    for other in ("DLS", "DLS'", "J^T", "LM (ours)", "Deo-Walker (ours)"):
        closer = (dist["SDLS"] < dist[other]).sum(axis=1)
        counts = np.bincount(closer, minlength=skel.n_effectors + 1)
        hist[f"SDLS vs {other}"] = 100.0 * counts / measured
    return {"distances": dist, "histograms": hist, "effectors": skel.n_effectors}


# -- convergence (Fig. 4) ---------------------------------------------------------------------


class ConvergenceDriver:
    """One ``solve`` step for a batch of independent streams, with the adaptive clamp state held
    per stream so that it can be reset when a stream's targets jump."""

    def __init__(self, skel: Skeleton, variant: Variant) -> None:
        self.skel, self.v = skel, variant
        self.method = make_method(variant.method, variant.params)
        e = skel.n_effectors
        self.blocks = np.repeat(np.arange(e), 3)
        self.rows = (np.arange(e)[:, None] * 6 + np.arange(3)[None, :]).reshape(-1)

    def start(self, frames: int) -> dict[str, Any]:
        return {
            "state": self.method.initial_state(frames),
            "dmax": np.full((frames, self.skel.n_effectors), np.inf),
            "prev": None,
        }

    def reset(self, carry: dict[str, Any], idx: np.ndarray) -> None:
        """Targets of streams ``idx`` jumped: D_max,i back to infinity, no previous distance."""
        carry["dmax"][idx] = np.inf
        if carry["prev"] is not None:
            carry["prev"][idx] = np.nan
        for key, value in self.method.initial_state(len(idx)).items():
            carry["state"][key][idx] = value

    def distances(self, pose: Pose, targets: np.ndarray) -> np.ndarray:
        points = self.skel.forward_kinematics(pose).points
        return np.asarray(np.linalg.norm(targets - points, axis=-1))

    def step(self, pose: Pose, targets: np.ndarray, carry: dict[str, Any]) -> Pose:
        """The pose after one step of every stream (solve's loop body, position goals, weight 1)."""
        skel, v = self.skel, self.v
        kin = skel.forward_kinematics(pose)
        e = targets - kin.points  # (F, E, 3)
        dist = np.linalg.norm(e, axis=-1)
        if v.clamp:
            prev = carry["prev"]
            if prev is not None:
                moved = np.maximum(prev - dist, 0.0) + D_MAX
                carry["dmax"] = np.where(np.isnan(prev), carry["dmax"], moved)
            carry["prev"] = dist.copy()
            limit = carry["dmax"]
            e = e * np.where(dist > limit, limit / np.maximum(dist, 1e-300), 1.0)[..., None]
        jac = skel.jacobian(kin, targets if v.jacobian_at_targets else None)
        f, n = len(e), skel.n_dofs
        jw = jac.reshape(f, -1, n)[:, self.rows]
        ew = e.reshape(f, -1)
        ctx = StepContext(
            0.5 * np.einsum("fm,fm->f", ew, ew),
            self.blocks,
            skel.n_effectors,
            skel.dof_rotational,
            carry["state"],
            {},
        )
        dq = self.method.step(jw, ew, ctx)
        if v.max_step is not None:
            dq = clamp_max_abs(dq, v.max_step, skel.dof_rotational)
        carry["state"] = ctx.state
        return skel.apply(pose, dq)


def convergence(
    shape: str = "double_y_shape",
    streams: int = 64,
    trials: int = 8,
    max_steps: int = 4000,
    names: tuple[str, ...] | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Run ``trials`` jumps in each of ``streams`` streams for every variant. Returns per
    variant (streams * trials,) final total distances and (trials, steps) histories."""
    skel = buss_kim(shape)
    rng = np.random.default_rng(seed)
    t0 = rng.uniform(0.0, 1000.0, streams)  # each stream's first target time
    trial_times = t0[:, None] + JUMP * np.arange(1, trials + 1)[None, :]  # (S, K)
    targets_all = buss_kim_targets(shape, trial_times.reshape(-1)).reshape(
        streams, trials, skel.n_effectors, 3
    )
    out: dict[str, Any] = {}
    for name in names or tuple(variants(shape)):
        drv = ConvergenceDriver(skel, variants(shape)[name])
        pose = Pose.rest(skel.n_bones, streams)
        carry = drv.start(streams)
        trial = np.zeros(streams, dtype=int)
        steps = np.zeros(streams, dtype=int)
        rises = np.zeros(streams, dtype=int)
        targets = targets_all[:, 0].copy()
        total = drv.distances(pose, targets).sum(axis=1)
        histories: list[list[list[float]]] = [[[float(total[s])]] for s in range(streams)]
        finals = np.full((streams, trials), np.nan)
        active = np.ones(streams, dtype=bool)
        while np.any(active):
            idx = np.flatnonzero(active)
            sub = pose.take(idx)
            sub_carry = {
                "state": {k: val[idx] for k, val in carry["state"].items()},
                "dmax": carry["dmax"][idx],
                "prev": None if carry["prev"] is None else carry["prev"][idx],
            }
            new = drv.step(sub, targets[idx], sub_carry)
            pose.put(idx, new)
            for k, val in sub_carry["state"].items():
                carry["state"][k][idx] = val
            carry["dmax"][idx] = sub_carry["dmax"]
            if sub_carry["prev"] is not None:
                if carry["prev"] is None:
                    carry["prev"] = np.full((streams, skel.n_effectors), np.nan)
                carry["prev"][idx] = sub_carry["prev"]
            new_total = drv.distances(new, targets[idx]).sum(axis=1)
            old_total = total[idx]
            steps[idx] += 1
            rises[idx] += new_total > old_total
            stop = (
                ((new_total <= old_total) & (old_total - new_total < 1e-5))
                | (rises[idx] >= 3)
                | (steps[idx] >= max_steps)
            )
            total[idx] = new_total
            for s, d in zip(idx, new_total, strict=True):
                histories[s][-1].append(float(d))
            done = idx[stop]
            if len(done):
                finals[done, trial[done]] = total[done]
                trial[done] += 1
                more = done[trial[done] < trials]
                active[done[trial[done] >= trials]] = False
                if len(more):
                    targets[more] = targets_all[more, trial[more]]
                    drv.reset(carry, more)
                    steps[more] = 0
                    rises[more] = 0
                    total[more] = drv.distances(pose.take(more), targets[more]).sum(axis=1)
                    for s in more:
                        histories[s].append([float(total[s])])
        out[name] = {
            "finals": finals.reshape(-1),
            "histories": [h for s in range(streams) for h in histories[s]],
        }
    return out


def fig4_tables(
    runs: dict[str, Any], reach_threshold: float = 1e-4
) -> tuple[dict[str, dict[str, tuple]], np.ndarray]:
    """Wins, mean excess and mean iterations to each LEVEL of the own optimum, for reachable
    trials (some paper method ended within ``reach_threshold`` of the targets, total distance)
    and unreachable ones. Wins and excess are against the best of the paper's five methods;
    our rows count the trials where they ended at or below that best."""
    paper = [n for n in PAPER_METHODS if n in runs]
    finals = {n: np.asarray(r["finals"]) for n, r in runs.items()}
    best = np.min(np.stack([finals[n] for n in paper]), axis=0)
    reachable = best < reach_threshold
    tables: dict[str, dict[str, tuple]] = {"reachable": {}, "unreachable": {}}
    for split, mask in (("reachable", reachable), ("unreachable", ~reachable)):
        for name, r in runs.items():
            f = finals[name][mask]
            wins = int(np.sum(f <= best[mask] * (1 + 1e-9) + 1e-12))
            excess = float(np.mean(f - best[mask])) if mask.any() else float("nan")
            its = []
            for level in LEVELS:
                counts = []
                for h, m in zip(r["histories"], mask, strict=True):
                    if not m:
                        continue
                    h = np.asarray(h)
                    counts.append(int(np.argmax(h - h[-1] <= level)))
                its.append(float(np.mean(counts)) if counts else float("nan"))
            tables[split][name] = (wins, excess, *its)
    return tables, reachable
