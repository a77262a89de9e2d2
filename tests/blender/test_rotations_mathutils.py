"""solvers.rotations agrees with Blender's mathutils conventions."""

from __future__ import annotations

import numpy as np
import pytest
from mathutils import Euler, Matrix, Quaternion

from jacobian_ik.solvers import rotations as rot

ORDERS = ["XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX"]
rng = np.random.default_rng(7)
SAMPLES = [rng.uniform(-3.0, 3.0, 3) for _ in range(20)]


@pytest.mark.parametrize("order", ORDERS)
def test_euler_matches_mathutils(order: str) -> None:
    for e in SAMPLES:
        want = np.array(Euler(e.tolist(), order).to_matrix())
        m = rot.matrix_from_euler(e, order)
        np.testing.assert_allclose(m, want, atol=1e-6)
        # ours may be the other of the two Euler solutions: compare the rotations
        ours = rot.euler_from_matrix(m, order)
        np.testing.assert_allclose(np.array(Euler(ours.tolist(), order).to_matrix()), m, atol=1e-6)
        theirs = np.array(Matrix(m.tolist()).to_euler(order))
        np.testing.assert_allclose(rot.matrix_from_euler(theirs, order), m, atol=1e-5)


def test_quaternion_matches_mathutils() -> None:
    for e in SAMPLES:
        m = np.array(Euler(e.tolist()).to_matrix())
        q = rot.quaternion_from_matrix(m)
        theirs = Quaternion(Matrix(m.tolist()).to_quaternion())
        assert abs(abs(float(np.dot(q, np.array(theirs)))) - 1.0) < 1e-6
        np.testing.assert_allclose(
            rot.matrix_from_quaternion(q), np.array(Quaternion(q.tolist()).to_matrix()), atol=1e-6
        )


def test_axis_angle_matches_mathutils() -> None:
    for e in SAMPLES:
        m = np.array(Euler(e.tolist()).to_matrix())
        angle, *axis = rot.axis_angle_from_matrix(m)
        want = np.array(Matrix.Rotation(angle, 3, axis))
        np.testing.assert_allclose(want, m, atol=1e-6)
        _, angle_b = Matrix(m.tolist()).to_quaternion().to_axis_angle()
        assert angle == pytest.approx(angle_b, abs=1e-5)
