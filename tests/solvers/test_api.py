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
