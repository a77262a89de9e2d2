"""The optional peers: roboticstoolbox-python's C++ ``ik_LM`` and pybullet's
``calculateInverseKinematics``, on the same problems as ours. Both are benchmark-only
dependencies (benchmarks/requirements.txt); every function here says when a peer is missing
instead of failing."""

from __future__ import annotations

import importlib
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from jacobian_ik.solvers import Effector, Joint, Skeleton
from jacobian_ik.solvers.rotations import matrix_from_quaternion
from tests.rigs.skeletons import translation


def available(module: str) -> tuple[bool, str]:
    """(importable, version or the import error)."""
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # any import failure means "not available", with its reason
        return False, f"{type(exc).__name__}: {exc}"
    return True, str(getattr(mod, "__version__", "unknown version"))


def rtb_version() -> tuple[bool, str]:
    return available("roboticstoolbox")


def pybullet_version() -> tuple[bool, str]:
    ok, why = available("pybullet")
    if ok:
        import pybullet

        why = f"API {pybullet.getAPIVersion()}"
    return ok, why


# -- the 10-link test chain -----------------------------------------------------------------

CHAIN_LINKS = 10
CHAIN_LENGTH = 0.1
CHAIN_AXES = "ZX" * (CHAIN_LINKS // 2)  # joint i turns about its local CHAIN_AXES[i]


def chain10() -> Skeleton:
    """10 revolute joints alternating about the local z and x axes, links of 0.1 along z (each
    joint at the end of the previous link, the first at the origin), effector at the last tip."""
    n = CHAIN_LINKS
    rest = np.stack([np.eye(4) if b == 0 else translation(0, 0, CHAIN_LENGTH) for b in range(n)])
    joints = [Joint.hinge(a) for a in CHAIN_AXES]
    return Skeleton(
        list(range(-1, n - 1)), rest, joints, [Effector(n - 1, (0, 0, CHAIN_LENGTH), "tip")]
    )


def chain_targets(seed: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(reachable, unreachable) target positions (count, 3): reachable ones are the tips of
    random poses (angles uniform in +-1 rad); unreachable ones lie at 1.2 to 2 times the reach
    in a random direction (the optimum is then |t| - reach, the chain pointing at the target)."""
    from jacobian_ik.solvers import Pose

    rng = np.random.default_rng(seed)
    skel = chain10()
    q = rng.uniform(-1.0, 1.0, (count, CHAIN_LINKS))
    pose = Pose.rest(CHAIN_LINKS, count)
    axis = np.array(["XYZ".index(a) for a in CHAIN_AXES])
    v = np.zeros((count, CHAIN_LINKS, 3))
    v[:, np.arange(CHAIN_LINKS), axis] = q
    from jacobian_ik.solvers import exp_so3

    pose.rotations = exp_so3(v)
    reach_pts = skel.forward_kinematics(pose).points[:, 0]
    d = rng.normal(size=(count, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    far = d * (CHAIN_LINKS * CHAIN_LENGTH) * rng.uniform(1.2, 2.0, (count, 1))
    return reach_pts, far


# -- roboticstoolbox ----------------------------------------------------------------------


def rtb_sugihara_arm() -> Any:
    """The Sugihara arm as an rtb ETS: per joint Rz Ry Rx (the same order as rigs.sugihara_arm)."""
    import roboticstoolbox as rtb

    et = rtb.ET
    ets = rtb.ETS()
    for j in range(4):
        if j > 0:
            ets = ets * et.tz(0.15)
        ets = ets * et.Rz() * et.Ry() * et.Rx()
    return ets * et.tz(0.05)


def rtb_chain10() -> Any:
    import roboticstoolbox as rtb

    et = rtb.ET
    ets = rtb.ETS()
    for j, a in enumerate(CHAIN_AXES):
        if j > 0:
            ets = ets * et.tz(CHAIN_LENGTH)
        ets = ets * (et.Rz() if a == "Z" else et.Rx())
    return ets * et.tz(CHAIN_LENGTH)


def rtb_solve(
    ets: Any, poses: np.ndarray, ilimit: int, tol: float, mask: np.ndarray | None = None
) -> dict[str, Any]:
    """rtb ``ik_LM(method="sugihara", k=1e-3)`` from q0 = 0 for every (4, 4) pose, one search
    (slimit=1: no random restarts, like the paper), no joint limits. Returns its success flags,
    iterations, residuals sqrt(2 E) (rtb's E = 1/2 e^T W_E e with the same angle-axis error),
    the q it returned and the time per goal (us), measured around each call."""
    n = ets.n
    q0 = np.zeros(n)
    out_q = np.zeros((len(poses), n))
    ok = np.zeros(len(poses), dtype=bool)
    its = np.zeros(len(poses), dtype=int)
    res = np.zeros(len(poses))
    times = np.zeros(len(poses))
    for i, tep in enumerate(poses):
        t0 = time.perf_counter()
        sol = ets.ik_LM(
            tep,
            q0=q0,
            ilimit=ilimit,
            slimit=1,
            tol=tol,
            mask=mask,
            joint_limits=False,
            k=1e-3,
            method="sugihara",
        )
        times[i] = time.perf_counter() - t0
        out_q[i], ok[i], its[i] = sol.q, sol.success, sol.iterations
        res[i] = np.sqrt(2.0 * max(float(sol.residual), 0.0))
    return {"success": ok, "iterations": its, "residuals": res, "q": out_q, "us": times * 1e6}


def goal_matrices(goals: np.ndarray) -> np.ndarray:
    """(N, 4, 4) homogeneous matrices of [x, y, z, qw, qx, qy, qz] goals."""
    m = np.tile(np.eye(4), (len(goals), 1, 1))
    m[:, :3, :3] = matrix_from_quaternion(goals[:, 3:])
    m[:, :3, 3] = goals[:, :3]
    return m


# -- pybullet -------------------------------------------------------------------------------


def _chain_urdf() -> str:
    links = ['<link name="base"/>']
    joints = []
    parent = "base"
    for i, a in enumerate(CHAIN_AXES):
        name = f"link{i}"
        links.append(
            f'<link name="{name}"><inertial><mass value="0.1"/>'
            '<inertia ixx="1e-4" iyy="1e-4" izz="1e-4" ixy="0" ixz="0" iyz="0"/>'
            "</inertial></link>"
        )
        z = 0.0 if i == 0 else CHAIN_LENGTH
        axis = "0 0 1" if a == "Z" else "1 0 0"
        joints.append(
            f'<joint name="j{i}" type="continuous"><parent link="{parent}"/>'
            f'<child link="{name}"/><origin xyz="0 0 {z}"/><axis xyz="{axis}"/></joint>'
        )
        parent = name
    links.append(
        '<link name="tip"><inertial><mass value="0.01"/>'
        '<inertia ixx="1e-6" iyy="1e-6" izz="1e-6" ixy="0" ixz="0" iyz="0"/></inertial></link>'
    )
    joints.append(
        f'<joint name="tip" type="fixed"><parent link="{parent}"/><child link="tip"/>'
        f'<origin xyz="0 0 {CHAIN_LENGTH}"/></joint>'
    )
    return '<?xml version="1.0"?><robot name="chain10">' + "".join(links + joints) + "</robot>"


def _sugihara_urdf() -> str:
    """The Sugihara arm: per spherical joint three continuous joints z, y, x at one point."""
    links = ['<link name="base"/>']
    joints = []
    parent = "base"
    k = 0
    for j in range(4):
        for a, axis in enumerate(("0 0 1", "0 1 0", "1 0 0")):
            name = f"l{k}"
            links.append(
                f'<link name="{name}"><inertial><mass value="0.1"/>'
                '<inertia ixx="1e-4" iyy="1e-4" izz="1e-4" ixy="0" ixz="0" iyz="0"/>'
                "</inertial></link>"
            )
            z = 0.15 if (a == 0 and j > 0) else 0.0
            joints.append(
                f'<joint name="j{k}" type="continuous"><parent link="{parent}"/>'
                f'<child link="{name}"/><origin xyz="0 0 {z}"/><axis xyz="{axis}"/></joint>'
            )
            parent = name
            k += 1
    links.append(
        '<link name="tip"><inertial><mass value="0.01"/>'
        '<inertia ixx="1e-6" iyy="1e-6" izz="1e-6" ixy="0" ixz="0" iyz="0"/></inertial></link>'
    )
    joints.append(
        f'<joint name="tip" type="fixed"><parent link="{parent}"/><child link="tip"/>'
        '<origin xyz="0 0 0.05"/></joint>'
    )
    return '<?xml version="1.0"?><robot name="sugihara">' + "".join(links + joints) + "</robot>"


def pybullet_solve(
    robot: str, positions: np.ndarray, quaternions: np.ndarray | None, iterations: int
) -> dict[str, Any]:
    """pybullet ``calculateInverseKinematics`` (its default DLS solver) for every target, each
    from q = 0 (joint states reset before each call), ``maxNumIterations=iterations``,
    ``residualThreshold=1e-12``. ``robot`` is "chain10" or "sugihara"; ``quaternions`` (w, x,
    y, z) adds the orientation goal. Returns the q it returned and the time per call (us)."""
    import pybullet as pb

    urdf = _chain_urdf() if robot == "chain10" else _sugihara_urdf()
    client = pb.connect(pb.DIRECT)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{robot}.urdf"
            path.write_text(urdf)
            body = pb.loadURDF(str(path), useFixedBase=True, physicsClientId=client)
        n = pb.getNumJoints(body, physicsClientId=client) - 1  # the last joint is the fixed tip
        tip = n
        out = np.zeros((len(positions), n))
        times = np.zeros(len(positions))
        for i, p in enumerate(positions):
            for j in range(n):
                pb.resetJointState(body, j, 0.0, physicsClientId=client)
            kw: dict[str, Any] = {
                "maxNumIterations": iterations,
                "residualThreshold": 1e-12,
                "physicsClientId": client,
            }
            if quaternions is not None:
                w, x, y, z = quaternions[i]
                kw["targetOrientation"] = [x, y, z, w]
            t0 = time.perf_counter()
            q = pb.calculateInverseKinematics(body, tip, list(map(float, p)), **kw)
            times[i] = time.perf_counter() - t0
            out[i] = q[:n]
    finally:
        pb.disconnect(client)
    return {"q": out, "us": times * 1e6}
