"""The bridge's domain error: raised deep, reported once by the operator."""


class RigError(Exception):
    """The armature, its goals or the settings cannot be solved as they are (message for users)."""


class Cancelled(RigError):
    """The run was cancelled (Esc, or its progress callback returned True): nothing was written."""
