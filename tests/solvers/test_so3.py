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


@pytest.mark.parametrize("shape", [(3, 3), (7, 3, 3), (40, 6, 3, 3)])
def test_det3_quick_is_the_determinant_to_rounding(shape):
    """``so3.det3_quick`` (a row dotted with a cross product) against ``det3`` and LAPACK:
    the same determinants to rounding, mirrored matrices negative, zero where a row is."""
    from jacobian_ik.solvers.so3 import det3, det3_quick

    m = np.random.default_rng(len(shape)).normal(size=shape)
    got = det3_quick(m)
    assert got.shape == shape[:-2]
    np.testing.assert_allclose(got, det3(m), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got, np.linalg.det(m), rtol=1e-10, atol=1e-14)
    mirrored = m.copy()
    mirrored[..., :, 0] *= -1.0
    np.testing.assert_array_equal(np.sign(det3_quick(mirrored)), -np.sign(got))
    m[..., 2, :] = 0.0
    assert np.all(det3_quick(m) == 0.0)
