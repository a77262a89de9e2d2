"""Shared test skeletons for the solver tests."""

import numpy as np

from jacobian_ik.solvers import Effector, Joint, Skeleton


def random_rest(rng, n):
    from jacobian_ik.solvers import exp_so3

    rest = np.tile(np.eye(4), (n, 1, 1))
    rest[:, :3, :3] = exp_so3(rng.normal(size=(n, 3)))
    rest[:, :3, 3] = rng.normal(size=(n, 3)) * 0.5
    return rest


def tree_with_every_joint(rng) -> Skeleton:
    """A branching tree with every joint kind, stretch, locations, and several effectors."""
    joints = [
        Joint("XYZ", location_axes="XYZ"),  # root: ball + location
        Joint("XYZ", stretch=True),
        Joint("X"),
        Joint("Y"),
        Joint("Z", stretch=True),
        Joint("XZ"),
        Joint("XY"),
        Joint("YZ", location_axes="Y"),
        Joint(""),  # fixed
        Joint("XYZ"),
    ]
    parents = [-1, 0, 1, 2, 3, 1, 5, 6, 7, 8]
    effectors = [
        Effector(4, (0.1, 0.7, -0.2), "a"),
        Effector(4, (0, 0, 0), "head_of_stretch_bone"),
        Effector(9, (0.0, 0.5, 0.0), "b"),
        Effector(1, (0.0, 0.3, 0.0), "c"),
    ]
    return Skeleton(parents, random_rest(rng, len(parents)), joints, effectors)
