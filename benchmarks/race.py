"""Racing the peers on the same goals in the same run: the Sugihara random test and a 10-link
chain (reachable and unreachable position targets). Ours batched (every goal one frame of one
``solve`` call) and one goal per call; roboticstoolbox ``ik_LM(method="sugihara", k=1e-3)`` and
pybullet ``calculateInverseKinematics`` one goal per call (they have no batch API)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from jacobian_ik.solvers import Goals, Pose, Settings, Solver, solve
from tests.rigs.skeletons import sugihara_arm

from . import peers, sugihara

CHAIN_TOL = 1e-4  # a chain solve succeeds within this of the best possible distance


def _ours_one_at_a_time(
    skel: Any, goals: Goals, settings: Settings, count: int, prepared: bool = False
) -> np.ndarray:
    """Seconds per goal, solving goals 0..count-1 one per ``solve`` call, or with ``prepared``
    one per call of a ``Solver`` made once (what live posing and the API use)."""
    pos = np.asarray(goals.position)
    rot = None if goals.rotation is None else np.asarray(goals.rotation)
    times = np.zeros(count)
    call = Solver(skel, settings).solve if prepared else (lambda g: solve(skel, g, settings))
    for i in range(count):
        g = Goals(
            pos[i : i + 1],
            None if rot is None else rot[i : i + 1],
            rotation_weight=goals.rotation_weight,
        )
        t0 = time.perf_counter()
        call(g)
        times[i] = time.perf_counter() - t0
    return times


def _fk_residuals(skel: Any, q: np.ndarray, goals: np.ndarray) -> np.ndarray:
    """Sugihara residuals of hinge angles q (N, 12) (Euler Z, Y, X per joint)."""
    from jacobian_ik.solvers import angle_axis, exp_so3
    from jacobian_ik.solvers.rotations import matrix_from_quaternion

    pose = Pose.rest(skel.n_bones, len(q))
    v = np.zeros((len(q), skel.n_bones, 3))
    v[:, np.arange(skel.n_bones), skel.dof_axis] = q
    pose.rotations = exp_so3(v)
    kin = skel.forward_kinematics(pose)
    ep = goals[:, :3] - kin.points[:, 0]
    er = angle_axis(
        matrix_from_quaternion(goals[:, 3:]) @ np.swapaxes(kin.frames_rot[:, 0], -1, -2)
    )
    return np.asarray(np.sqrt((ep**2).sum(1) + (er**2).sum(1)))


def sugihara_race(
    table2: dict[str, Any],
    single_count: int = 100,
    rtb_limits: tuple[int, ...] = (100, 1000),
    max_iterations: int = 10000,
) -> dict[str, Any]:
    """Rows: (label, success, us per goal, mean iterations, note). Success uses the paper's
    criterion against the best residual of every method of Table II and every peer run."""
    goals = np.asarray(table2["goals"])
    count = len(goals)
    skel = sugihara_arm()
    g = sugihara.as_goals(goals)
    residuals: dict[str, np.ndarray] = {
        k: np.asarray(m["residuals"]) for k, m in table2["methods"].items()
    }
    rows: dict[str, dict[str, Any]] = {}
    ours = table2["methods"]["sugihara"]
    rows["ours LM(proposed), paper stop rules, batched"] = {
        "key": "sugihara",
        "us": ours["mean_us"],
        "iterations": ours["mean_iterations"],
    }
    for limit in rtb_limits:
        st = sugihara.paper_settings("lm", {"w_bar": 1e-3}, limit)
        t0 = time.perf_counter()
        res = solve(skel, g, st)
        sec = time.perf_counter() - t0
        key = f"ours_{limit}"
        residuals[key] = np.hypot(res.position_error[:, 0], res.rotation_error[:, 0])
        rows[f"ours LM(proposed), at most {limit} iterations, batched"] = {
            "key": key,
            "us": sec / count * 1e6,
            "iterations": float(np.mean(res.iterations)),
        }
    n1 = min(single_count, count)
    st = sugihara.paper_settings("lm", {"w_bar": 1e-3}, max_iterations)
    for prepared, how in ((False, "solve"), (True, "a prepared Solver")):
        one = _ours_one_at_a_time(skel, sugihara.as_goals(goals[:n1]), st, n1, prepared)
        rows[f"ours LM(proposed), paper stop rules, one goal per call of {how} (first {n1})"] = {
            "key": "sugihara",
            "us": float(np.mean(one) * 1e6),
            "iterations": float("nan"),
            "subset": n1,
        }
    status: dict[str, str] = {}
    ok, why = peers.rtb_version()
    status["roboticstoolbox"] = why
    if ok:
        ets = peers.rtb_sugihara_arm()
        mats = peers.goal_matrices(goals)
        for limit in rtb_limits:
            r = peers.rtb_solve(ets, mats, limit, 1e-14)
            key = f"rtb_{limit}"
            residuals[key] = r["residuals"]
            rows[f"roboticstoolbox ik_LM sugihara k=1e-3, ilimit={limit}"] = {
                "key": key,
                "us": float(np.mean(r["us"])),
                "iterations": float(np.mean(r["iterations"])),
                "own_success": int(r["success"].sum()),
            }
    ok, why = peers.pybullet_version()
    status["pybullet"] = why
    if ok:
        r = peers.pybullet_solve("sugihara", goals[:, :3], goals[:, 3:], 100)
        residuals["pybullet"] = _fk_residuals(skel, r["q"], goals)
        rows["pybullet calculateInverseKinematics (DLS), 100 iterations"] = {
            "key": "pybullet",
            "us": float(np.mean(r["us"])),
            "iterations": float("nan"),
        }
    best = np.min(np.stack(list(residuals.values())), axis=0)
    for row in rows.values():
        res = residuals[row["key"]]
        n = row.get("subset", count)
        row["success"] = int(np.sum(res[:n] <= best[:n] + sugihara.SUCCESS_GAP))
        row["count"] = n
    return {"rows": rows, "status": status}


def chain_race(count: int = 200, seed: int = 3, single_count: int = 50) -> dict[str, Any]:
    """The 10-link chain: success and us per solve, reachable and unreachable targets, 100
    iterations for everyone, every solve from q = 0. Success: within CHAIN_TOL of the target
    (reachable) or of the smallest distance any solver reached (unreachable: from the straight
    start all gradient methods stop at the same stationary points, above |t| - reach)."""
    skel = peers.chain10()
    reach_t, far_t = peers.chain_targets(seed, count)
    out: dict[str, Any] = {"rows": {}, "status": {}}
    st = Settings(method="lm", max_iterations=100, tolerance=1e-6)
    for split, targets in (("reachable", reach_t), ("unreachable", far_t)):
        errors: dict[str, np.ndarray] = {}
        us: dict[str, float] = {}
        g = Goals(targets[:, None])
        t0 = time.perf_counter()
        res = solve(skel, g, st)
        us["ours LM, batched"] = (time.perf_counter() - t0) / count * 1e6
        errors["ours LM, batched"] = res.position_error[:, 0]
        for prepared, how in ((False, "solve"), (True, "a prepared Solver")):
            one = _ours_one_at_a_time(skel, g, st, min(single_count, count), prepared)
            us[f"ours LM, one goal per call of {how}"] = float(np.mean(one) * 1e6)
        ok, why = peers.rtb_version()
        out["status"]["roboticstoolbox"] = why
        if ok:
            ets = peers.rtb_chain10()
            mats = np.tile(np.eye(4), (count, 1, 1))
            mats[:, :3, 3] = targets
            r = peers.rtb_solve(ets, mats, 100, 1e-14, mask=np.array([1, 1, 1, 0, 0, 0.0]))
            pose = _chain_pose(skel, r["q"])
            e = np.linalg.norm(targets - skel.forward_kinematics(pose).points[:, 0], axis=1)
            # rtb returns a random q on failure: count its own residual for those
            key = "roboticstoolbox ik_LM sugihara, ilimit=100"
            errors[key] = np.where(r["success"], e, r["residuals"])
            us[key] = float(np.mean(r["us"]))
        ok, why = peers.pybullet_version()
        out["status"]["pybullet"] = why
        if ok:
            r = peers.pybullet_solve("chain10", targets, None, 100)
            pose = _chain_pose(skel, r["q"])
            key = "pybullet calculateInverseKinematics, 100 iterations"
            errors[key] = np.linalg.norm(
                targets - skel.forward_kinematics(pose).points[:, 0], axis=1
            )
            us[key] = float(np.mean(r["us"]))
        best = np.min(np.stack(list(errors.values())), axis=0)
        if split == "reachable":
            best = np.zeros_like(best)
        rows = out["rows"].setdefault(split, {})
        for key, t in us.items():
            err = errors.get(key)
            rows[key] = (
                float("nan") if err is None else int(np.sum(err <= best + CHAIN_TOL)),
                t,
            )
    out["count"] = count
    return out


def _chain_pose(skel: Any, q: np.ndarray) -> Pose:
    from jacobian_ik.solvers import exp_so3

    pose = Pose.rest(skel.n_bones, len(q))
    v = np.zeros((len(q), skel.n_bones, 3))
    v[:, np.arange(skel.n_bones), skel.dof_axis] = q
    pose.rotations = exp_so3(v)
    return pose
