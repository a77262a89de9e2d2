"""Round trips and continuity of solvers.rotations (numpy only; mathutils checks live in
tests/blender/test_rotations_mathutils.py)."""

import numpy as np
import pytest

from jacobian_ik.solvers import rotations as rot

ORDERS = rot.EULER_ORDERS


def random_rotations(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(n, 4))
    return rot.matrix_from_quaternion(q)


def test_matrices_are_rotations() -> None:
    m = random_rotations(50)
    np.testing.assert_allclose(
        m @ np.swapaxes(m, -1, -2), np.broadcast_to(np.eye(3), m.shape), atol=1e-12
    )
    np.testing.assert_allclose(np.linalg.det(m), 1.0, atol=1e-12)


def test_single_axis_euler_follows_right_hand_rule() -> None:
    r = rot.matrix_from_euler([0.0, 0.0, np.pi / 2], "XYZ")
    np.testing.assert_allclose(r @ [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], atol=1e-12)
    r = rot.matrix_from_euler([np.pi / 2, 0.0, 0.0], "XYZ")
    np.testing.assert_allclose(r @ [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], atol=1e-12)


@pytest.mark.parametrize("order", ORDERS)
def test_euler_order_applies_first_axis_first(order: str) -> None:
    e = np.array([0.3, -0.7, 1.1])
    expected = np.eye(3)
    for axis in order:
        single = np.zeros(3)
        single["XYZ".index(axis)] = e["XYZ".index(axis)]
        expected = rot.matrix_from_euler(single, "XYZ") @ expected
    np.testing.assert_allclose(rot.matrix_from_euler(e, order), expected, atol=1e-12)


@pytest.mark.parametrize("order", ORDERS)
def test_euler_round_trip(order: str) -> None:
    m = random_rotations(200, seed=1)
    e = rot.euler_from_matrix(m, order)
    np.testing.assert_allclose(rot.matrix_from_euler(e, order), m, atol=1e-10)
    j = order[1]
    assert np.all(np.abs(e[:, "XYZ".index(j)]) <= np.pi / 2 + 1e-12)


@pytest.mark.parametrize("order", ORDERS)
def test_euler_gimbal_lock_round_trip(order: str) -> None:
    e = np.zeros((3, 3))
    middle = "XYZ".index(order[1])
    e[:, middle] = [np.pi / 2, -np.pi / 2, np.pi / 2]
    e[:, "XYZ".index(order[0])] = [0.4, 0.1, -2.0]
    e[:, "XYZ".index(order[2])] = [0.2, 0.5, 1.0]
    m = rot.matrix_from_euler(e, order)
    np.testing.assert_allclose(
        rot.matrix_from_euler(rot.euler_from_matrix(m, order), order), m, atol=1e-7
    )


def test_quaternion_round_trip_and_sign() -> None:
    m = random_rotations(300, seed=2)
    q = rot.quaternion_from_matrix(m)
    assert np.all(q[:, 0] >= 0.0)
    np.testing.assert_allclose(np.linalg.norm(q, axis=-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(rot.matrix_from_quaternion(q), m, atol=1e-12)


def test_quaternion_of_half_turns() -> None:
    for axis in range(3):
        e = np.zeros(3)
        e[axis] = np.pi
        m = rot.matrix_from_euler(e)
        np.testing.assert_allclose(
            rot.matrix_from_quaternion(rot.quaternion_from_matrix(m)), m, atol=1e-12
        )


def test_axis_angle_round_trip() -> None:
    m = random_rotations(100, seed=3)
    aa = rot.axis_angle_from_matrix(m)
    assert np.all((aa[:, 0] >= 0.0) & (aa[:, 0] <= np.pi + 1e-12))
    np.testing.assert_allclose(np.linalg.norm(aa[:, 1:], axis=-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(rot.matrix_from_axis_angle(aa), m, atol=1e-12)
    np.testing.assert_allclose(rot.axis_angle_from_matrix(np.eye(3)), [0.0, 0.0, 1.0, 0.0])


def test_batched_over_leading_axes() -> None:
    m = random_rotations(24, seed=4).reshape(2, 3, 4, 3, 3)
    assert rot.quaternion_from_matrix(m).shape == (2, 3, 4, 4)
    assert rot.euler_from_matrix(m, "ZXY").shape == (2, 3, 4, 3)
    assert rot.axis_angle_from_matrix(m).shape == (2, 3, 4, 4)


def spin(n: int) -> np.ndarray:
    """Rotations turning about a tilted axis by more than two full turns over n frames."""
    angle = np.linspace(0.0, 5 * np.pi, n)
    axis = np.array([0.3, 0.8, -0.5]) / np.linalg.norm([0.3, 0.8, -0.5])
    aa = np.concatenate([angle[:, None], np.broadcast_to(axis, (n, 3))], axis=1)
    return rot.matrix_from_axis_angle(aa)


def test_quaternions_continuous() -> None:
    m = spin(200)
    q = rot.make_quaternions_continuous(rot.quaternion_from_matrix(m))
    assert np.all(np.sum(q[1:] * q[:-1], axis=-1) > 0.0)
    np.testing.assert_allclose(rot.matrix_from_quaternion(q), m, atol=1e-12)
    seeded = rot.make_quaternions_continuous(q, previous=-q[0])
    np.testing.assert_allclose(seeded, -q)
    # Axis-angle from continuous quaternions is continuous too.
    aa = rot.axis_angle_from_quaternion(q)
    assert np.max(np.abs(np.diff(aa[:, 0]))) < 0.2


@pytest.mark.parametrize("order", ORDERS)
def test_euler_continuous(order: str) -> None:
    m = spin(300)
    raw = rot.euler_from_matrix(m, order)
    e = rot.make_euler_continuous(raw, order)
    assert np.max(np.abs(np.diff(e, axis=0))) < 0.5
    np.testing.assert_allclose(rot.matrix_from_euler(e, order), m, atol=1e-9)


def test_euler_continuous_seed_and_bone_axis() -> None:
    m = random_rotations(6, seed=5).reshape(2, 3, 3, 3)  # (frames, bones, 3, 3)
    raw = rot.euler_from_matrix(m, "XYZ")
    seed = raw[0] + 2 * np.pi
    e = rot.make_euler_continuous(raw, "XYZ", previous=seed)
    np.testing.assert_allclose(e[0], seed, atol=1e-12)
    np.testing.assert_allclose(rot.matrix_from_euler(e, "XYZ"), m, atol=1e-12)


def test_axis_angle_continuous_through_identity() -> None:
    """A hinge swinging through the identity: the axis must not flip while the angle bounces."""
    angle = np.linspace(-0.5, 0.5, 21)
    aa = np.concatenate([angle[:, None], np.broadcast_to([0.0, 0.0, 1.0], (21, 3))], axis=1)
    m = rot.matrix_from_axis_angle(aa)
    raw = rot.axis_angle_from_matrix(m)
    assert np.max(np.abs(np.diff(raw[:, 1:], axis=0))) >= 1.0  # the raw axis flips
    out = rot.make_axis_angle_continuous(raw, previous=aa[0])
    np.testing.assert_allclose(out, aa, atol=1e-9)
    np.testing.assert_allclose(rot.matrix_from_axis_angle(out), m, atol=1e-12)
    spun = rot.make_axis_angle_continuous(rot.axis_angle_from_matrix(spin(300)[1:]))
    assert np.max(np.abs(np.diff(spun, axis=0))) < 0.2


def test_unknown_order() -> None:
    with pytest.raises(ValueError, match="Euler order"):
        rot.matrix_from_euler([0.0, 0.0, 0.0], "XXY")
