"""The bridge's domain error: raised deep, reported once by the operator."""


class RigError(Exception):
    """The armature, its goals or the settings cannot be solved as they are (message for users)."""
