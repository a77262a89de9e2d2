"""The solver's exceptions: one base class, one subclass per kind of bad input."""


class IKError(Exception):
    """Base class of every error the solver raises on purpose."""


class SkeletonError(IKError):
    """The kinematic tree is malformed (bad parents, rest matrices, joints or effectors)."""


class GoalError(IKError):
    """The goals do not fit the skeleton (shapes, weights, non-finite targets)."""


class SettingsError(IKError):
    """An unknown method, an unknown parameter or a parameter out of its range."""
