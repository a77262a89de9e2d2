import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from jacobian_ik.solvers import GoalError, Goals, Settings, SkeletonError, solve
from tests.rigs.skeletons import chain

ROOT = Path(__file__).resolve().parents[2]


def test_solvers_import_without_blender():
    code = (
        "import sys; sys.modules['bpy'] = None; sys.modules['mathutils'] = None; "
        "import solvers; print(len(solvers.METHODS))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert int(out.stdout) >= 13


@pytest.mark.parametrize(
    "goals, match",
    [
        (Goals(position=[[np.nan, 0, 0]]), "NaN"),
        (Goals(position=np.zeros((0, 1, 3))), "no frames"),
        (Goals(position=[[0, 1, 0]], position_weight=[0]), "zero weight"),
        (Goals(position=[[0, 1, 0]], base=np.diag([1, 0, 1, 1.0])), "singular"),
        (Goals(position=[[0, 1, 0]], base=np.full((4, 4), np.inf)), "NaN or inf"),
        (Goals(position=[[0, 1, 0], [1, 1, 1]]), "shape"),
        (Goals(position=[[0, 1, 0]], rotation_weight=[1]), "no target rotations"),
    ],
)
def test_bad_goals_are_named_errors(goals, match):
    with pytest.raises(GoalError, match=match):
        solve(chain(2), goals, Settings())


def test_bad_skeletons_are_named_errors():
    from jacobian_ik.solvers import Effector, Joint, Skeleton

    with pytest.raises(SkeletonError, match="parent"):
        Skeleton([1, -1], np.tile(np.eye(4), (2, 1, 1)), [Joint()] * 2, [Effector(0)])
    with pytest.raises(SkeletonError, match="rigid"):
        Skeleton([-1], np.diag([2.0, 1, 1, 1])[None], [Joint()], [Effector(0)])
    with pytest.raises(SkeletonError, match="effector"):
        Skeleton([-1], np.eye(4)[None], [Joint()], [Effector(3)])
    with pytest.raises(SkeletonError, match="axes"):
        Joint("XXQ")
    with pytest.raises(SkeletonError, match="stiffness"):
        Joint(stiffness={"rot_x": 1.0})
    for length in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(SkeletonError, match="length"):
            Joint(location_axes="X", length=length)


@pytest.mark.parametrize("mirror", [(-1, 1, 1), (1, -1, 1), (-1, -1, -1)])
def test_an_orientation_goal_on_a_mirrored_armature(mirror):
    """A base with negative scale mirrors the bones: an orientation goal then turns the bone's
    Y (along it) and Z onto the target's, its X mirrored, and the solve is its unmirrored
    twin's (the model-space goal was -lin^-1 R: every axis of the bone pointed away from the
    target's, the position missed by 0.25 on a Blender rig)."""
    skel = chain(3)
    angle = 0.7
    target = np.array(
        [[np.cos(angle), -np.sin(angle), 0.0], [np.sin(angle), np.cos(angle), 0.0], [0, 0, 1.0]]
    )
    d = np.diag([*mirror, 1.0]).astype(float)
    plain = Goals(position=[[[-1.2, 1.9, 0.3]]], rotation=target[None, None], rotation_weight=1.0)
    # the same target in the mirrored armature's world: its position mirrored, its orientation
    # the one whose Y and Z the mirrored bone can match
    world = d[:3, :3] @ target @ np.diag([-1.0, 1.0, 1.0]) if np.linalg.det(d) < 0 else target
    mirrored = Goals(
        position=[[d[:3, :3] @ [-1.2, 1.9, 0.3]]],
        rotation=world[None, None],
        rotation_weight=1.0,
        base=d,
    )
    a, b = solve(skel, plain, Settings()), solve(skel, mirrored, Settings())
    assert a.reason[0] == b.reason[0] == "converged"
    np.testing.assert_allclose(b.pose.rotations, a.pose.rotations, atol=1e-6)
    frame = d[:3, :3] @ skel.forward(b.pose)[0, 2, :3, :3]  # the bone in the world
    np.testing.assert_allclose(frame[:, 1:], world[:, 1:], atol=1e-4)
    np.testing.assert_allclose(frame[:, 0], -world[:, 0], atol=1e-4)
