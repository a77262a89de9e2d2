import numpy as np
import pytest

from jacobian_ik.solvers import angle_axis, exp_so3


def rot(axis, angle):
    axis = np.asarray(axis, float)
    return exp_so3(axis / np.linalg.norm(axis) * angle)


@pytest.mark.parametrize("degrees", [0.0, 1e-9, 30.0, 90.0, 135.0, 179.999, 180.0])
@pytest.mark.parametrize("axis", [(1, 0, 0), (0, 1, 0), (0, 0, 1), (1, -2, 0.5)])
def test_angle_axis_inverts_exp(degrees, axis):
    a = np.asarray(axis, float) / np.linalg.norm(axis) * np.radians(degrees)
    got = angle_axis(exp_so3(a))
    if degrees == 180.0:  # +a and -a are the same rotation
        assert np.allclose(got, a, atol=1e-9) or np.allclose(got, -a, atol=1e-9)
    else:
        assert np.allclose(got, a, atol=1e-9)


def test_sugihara_diagonal_cases_eq_23():
    for diag, expected in [
        ((1, 1, 1), (0, 0, 0)),
        ((1, -1, -1), (np.pi, 0, 0)),
        ((-1, 1, -1), (0, np.pi, 0)),
        ((-1, -1, 1), (0, 0, np.pi)),
    ]:
        assert np.allclose(angle_axis(np.diag(np.asarray(diag, float))), expected)


def test_angle_axis_at_90_degrees_exact():
    r = np.array([[1.0, 0, 0], [0, 0, -1], [0, 1, 0]])  # 90 degrees about X
    assert np.allclose(angle_axis(r), [np.pi / 2, 0, 0], atol=1e-15)


def test_batched_shapes():
    rng = np.random.default_rng(1)
    v = rng.normal(size=(4, 5, 3))
    v *= (np.pi * 0.99 / np.linalg.norm(v, axis=-1, keepdims=True)) * rng.random((4, 5, 1))
    r = exp_so3(v)
    assert r.shape == (4, 5, 3, 3)
    assert np.allclose(r @ np.swapaxes(r, -1, -2), np.eye(3), atol=1e-12)
    assert np.allclose(angle_axis(r), v, atol=1e-9)
