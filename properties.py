"""Goals and solver settings stored on each armature object as ``obj.jacobian_ik``."""

import math
from typing import Any

import bpy
from bpy.app.handlers import persistent
from bpy.props import (
    BoolProperty,
    CollectionProperty,
    EnumProperty,
    FloatProperty,
    IntProperty,
    PointerProperty,
    StringProperty,
)

from . import live
from .bridge.settings import parameter_property
from .solvers import METHODS
from .solvers.methods import Param

# (identifier, name, description): identifiers are the solver's method names in upper case;
# names and descriptions come from each method's class (solvers/methods.py)
METHOD_ITEMS = [(name.upper(), cls.label, cls.summary()) for name, cls in METHODS.items()]

GOAL_TYPE_ITEMS = [
    ("REACH", "Reach", "The effector reaches the target (position, and rotation when weighted)"),
    ("AIM", "Aim", "The bone turns so that its Aim Axis points at the target (a head, an eye)"),
]

AIM_AXIS_ITEMS = [
    (axis, axis, f"The bone's local {axis} axis points at the target")
    for axis in ("X", "Y", "Z", "-X", "-Y", "-Z")
]

MODE_ITEMS = [
    ("CONVERGE", "Converge", "Every frame iterates from its own pose until it converges"),
    ("TRACK", "Track", "Every frame starts from the previous frame's result and takes a few steps"),
]


class JacobianIKStashedConstraint(bpy.types.PropertyGroup):
    """An IK constraint removed by Import IK Constraints: what Restore IK Constraints needs to
    put it back as it was (its object pointers here, every other setting in ``settings``)."""

    stored: BoolProperty(name="Stored", description="A constraint is stashed here")  # type: ignore[valid-type]
    bone: StringProperty(name="Bone", description="The bone the constraint was on")  # type: ignore[valid-type]
    name: StringProperty(name="Name", description="The constraint's name")  # type: ignore[valid-type]
    index: IntProperty(name="Index", description="Its place in the bone's constraint stack")  # type: ignore[valid-type]
    target: PointerProperty(name="Target", type=bpy.types.Object)  # type: ignore[valid-type]
    pole_target: PointerProperty(name="Pole Target", type=bpy.types.Object)  # type: ignore[valid-type]
    settings: StringProperty(  # type: ignore[valid-type]
        name="Settings", description="The constraint's other settings, as JSON"
    )
    drivers: StringProperty(  # type: ignore[valid-type]
        name="Drivers",
        description="The constraint's drivers, parked (muted, under another path) while it is "
        "stashed: their paths and mute states, as JSON",
    )


class JacobianIKGoal(bpy.types.PropertyGroup):
    """One end effector: a bone pulled towards a target object (or a bone of a target armature)."""

    bone: StringProperty(name="Bone", description="The bone that is pulled (the end effector)")  # type: ignore[valid-type]
    target: PointerProperty(  # type: ignore[valid-type]
        name="Target", type=bpy.types.Object, description="The object the bone reaches for"
    )
    target_bone: StringProperty(  # type: ignore[valid-type]
        name="Target Bone",
        description="When the target is an armature: the bone whose head is the target",
    )
    chain_length: IntProperty(  # type: ignore[valid-type]
        name="Chain Length",
        description="Bones the solver may rotate, the goal's bone included (0: up to the root)",
        default=0,
        min=0,
        max=255,
    )
    chain_root: StringProperty(  # type: ignore[valid-type]
        name="Chain Root",
        description="The topmost bone the solver may rotate: the chain runs from the goal's "
        "bone up to this bone (empty: Chain Length applies)",
    )
    use_tail: BoolProperty(  # type: ignore[valid-type]
        name="Use Tail", description="The effector is the bone's tail (off: its head)", default=True
    )
    use_transform_locks: BoolProperty(  # type: ignore[valid-type]
        name="Transform Locks",
        description="The chain bones' rotation locks (Lock Rotation) lock the solve too, as "
        "their IK locks do (off: only the IK locks, as Blender's IK constraint; imported "
        "constraints are off)",
        default=True,
    )
    use_stretch: BoolProperty(  # type: ignore[valid-type]
        name="Stretch",
        description="Chain bones with IK Stretch may stretch toward a target out of reach "
        "(off: they keep their length, as Blender's IK constraint with Stretch off)",
        default=True,
    )
    position_weight: FloatProperty(  # type: ignore[valid-type]
        name="Position Weight",
        description="Weight of the position error",
        default=1.0,
        min=0.0,
        soft_max=1.0,
    )
    rotation_weight: FloatProperty(  # type: ignore[valid-type]
        name="Rotation Weight",
        description="Weight of the orientation error (0: position only)",
        default=0.0,
        min=0.0,
        soft_max=1.0,
    )
    pole_target: PointerProperty(  # type: ignore[valid-type]
        name="Pole Target",
        type=bpy.types.Object,
        description="The chain's middle joint (knee, elbow) bends toward this object; "
        "a secondary goal in the null space of the goals",
    )
    pole_angle: FloatProperty(  # type: ignore[valid-type]
        name="Pole Angle",
        subtype="ANGLE",
        default=0.0,
        soft_min=-math.pi,
        soft_max=math.pi,
        description="Turns the side the chain bends to about the line from its base to the "
        "target: 0 bends the middle joint toward the pole. Imported IK constraints get the "
        "angle that reproduces their own pole angle (a zigzag leg keeps its shape)",
    )
    pole_target_bone: StringProperty(  # type: ignore[valid-type]
        name="Pole Bone",
        description="When the pole target is an armature: the bone whose head is the pole",
    )
    stash: PointerProperty(  # type: ignore[valid-type]
        type=JacobianIKStashedConstraint,
        description="The IK constraint this goal was imported from, removed from the bone and "
        "kept here so that Restore IK Constraints can put it back",
    )
    type: EnumProperty(  # type: ignore[valid-type]
        name="Type",
        items=GOAL_TYPE_ITEMS,
        default="REACH",
        description="Reach the target, or aim an axis of the bone at it",
    )
    aim_axis: EnumProperty(  # type: ignore[valid-type]
        name="Aim Axis",
        items=AIM_AXIS_ITEMS,
        default="Y",
        description="The bone's local axis that points at the target (from the effector point)",
    )
    support: BoolProperty(  # type: ignore[valid-type]
        name="Support",
        description="The body stands on this goal (a foot): balance keeps the centre of mass "
        "over the midpoint of the support goals",
        default=False,
    )
    enabled: BoolProperty(name="Enabled", default=True)  # type: ignore[valid-type]
    error: FloatProperty(  # type: ignore[valid-type]
        name="Error", description="Largest distance to the target in the last run", unit="LENGTH"
    )
    error_mean: FloatProperty(  # type: ignore[valid-type]
        name="Mean Error", description="Mean distance to the target in the last run", unit="LENGTH"
    )
    rotation_error: FloatProperty(  # type: ignore[valid-type]
        name="Rotation Error",
        description="Largest orientation error in the last run",
        unit="ROTATION",
    )
    reachable: BoolProperty(  # type: ignore[valid-type]
        name="Reachable",
        description="In the last live solve: the target was within the chain's length",
        default=True,
    )


def _use_live_update(self: Any, context: Any) -> None:
    live.use_live_changed(self, context)


class JacobianIKSettings(bpy.types.PropertyGroup):
    """The goals of an armature, the solver settings and the last run's results."""

    goals: CollectionProperty(type=JacobianIKGoal)  # type: ignore[valid-type]
    active_goal_index: IntProperty(name="Active Goal", default=0, min=0)  # type: ignore[valid-type]

    method: EnumProperty(name="Method", items=METHOD_ITEMS, default="LM")  # type: ignore[valid-type]
    mode: EnumProperty(name="Mode", items=MODE_ITEMS, default="CONVERGE")  # type: ignore[valid-type]
    clamp_distance: FloatProperty(  # type: ignore[valid-type]
        name="Clamp Distance",
        description="Largest target distance seen by one step (0: off)",
        default=0.0,
        min=0.0,
        unit="LENGTH",
    )
    max_step: FloatProperty(  # type: ignore[valid-type]
        name="Max Step",
        description="Largest joint change of one step (0: off)",
        default=0.0,
        min=0.0,
        subtype="ANGLE",
    )
    max_iterations: IntProperty(name="Iterations", default=500, min=1, max=100000)  # type: ignore[valid-type]
    tolerance: FloatProperty(  # type: ignore[valid-type]
        name="Tolerance",
        description="Stop when every goal is closer than this",
        default=1e-5,
        min=0.0,
        precision=6,
        unit="LENGTH",
    )
    track_steps: IntProperty(  # type: ignore[valid-type]
        name="Steps per Frame",
        description="Steps per frame in Track mode",
        default=1,
        min=1,
        max=1000,
    )
    rest_weight: FloatProperty(  # type: ignore[valid-type]
        name="Stay Near Rest",
        description="Weight of a secondary goal pulling the chains toward the rest pose, in the "
        "null space of the goals (0: off)",
        default=0.0,
        min=0.0,
        soft_max=1.0,
    )
    max_stretch: FloatProperty(  # type: ignore[valid-type]
        name="Max Stretch",
        description="Bones with IK Stretch may grow up to this factor of their length "
        "(Import IK Constraints raises it to 10 for a chain that stretches: Blender's IK "
        "stretches without a bound)",
        default=2.0,
        min=1.0,
        soft_max=4.0,
    )
    move_root: BoolProperty(  # type: ignore[valid-type]
        name="Move Root",
        description="The root bone above the chains (a humanoid's hips) moves and turns freely "
        "to help every goal; pinned goals (feet) keep it honest",
        default=False,
    )
    root_stiffness: FloatProperty(  # type: ignore[valid-type]
        name="Root Stiffness",
        description="How reluctantly the root moves (0: as freely as the chains, 1: not at all)",
        default=0.0,
        min=0.0,
        max=1.0,
    )
    balance: BoolProperty(  # type: ignore[valid-type]
        name="Balance",
        description="Keep the centre of mass over the support goals (a task below the goals; "
        "bone masses from a 'jik_mass' property, else bone length)",
        default=False,
    )
    balance_weight: FloatProperty(  # type: ignore[valid-type]
        name="Balance Weight",
        description="Weight of the balance task (1: full, lower: softer)",
        default=1.0,
        min=0.0,
        max=1.0,
    )

    last_frames: IntProperty(name="Frames", description="Frames solved in the last run")  # type: ignore[valid-type]
    last_converged: IntProperty(name="Converged", description="Frames that converged")  # type: ignore[valid-type]
    last_iterations: IntProperty(name="Iterations", description="Most iterations of a frame")  # type: ignore[valid-type]
    last_time: FloatProperty(name="Time", description="Solve time of the last run (s)")  # type: ignore[valid-type]
    last_keys: IntProperty(name="Keys", description="Keyframes written by the last run")  # type: ignore[valid-type]
    last_balance: FloatProperty(  # type: ignore[valid-type]
        name="Balance",
        description="Largest horizontal distance of the centre of mass from the support point "
        "in the last run (-1: not measured)",
        default=-1.0,
        unit="LENGTH",
    )

    use_live: BoolProperty(  # type: ignore[valid-type]
        name="Live",
        description="Re-solve the current frame whenever a target or the armature changes",
        default=False,
        update=_use_live_update,
    )
    live_iterations: IntProperty(name="Iterations", description="Iterations of the last live solve")  # type: ignore[valid-type]
    live_time: FloatProperty(name="Time", description="Time of the last live update (s)")  # type: ignore[valid-type]


FLOAT_MAX = 3.4028234663852886e38  # Blender's largest float property value (no upper bound)


def parameter_blender_property(method: str, param: Param) -> Any:
    """The Blender property of one declared method parameter: an enum for choices, a float with
    the declared range (open bounds are refused at solve time), its doc and unit."""
    description = f"{param.doc} ({method}, range {param.range_text()}, default {param.default})"
    name = param.name.replace("_", " ").title()
    if param.choices:
        items = [(c, c.title(), f"{param.doc}: {c}") for c in param.choices]
        return EnumProperty(
            name=name, description=description, items=items, default=str(param.default)
        )
    assert isinstance(param.default, float)
    return FloatProperty(
        name=name,
        description=description,
        default=param.default,
        precision=max(3, min(6, int(-math.floor(math.log10(param.default))) + 1))
        if 0 < param.default < 1
        else 3,
        unit=param.unit,  # type: ignore[arg-type]
        min=param.low,
        max=min(param.high, FLOAT_MAX),
    )


def _parameter_properties() -> dict[str, Any]:
    """One property per declared parameter of every solver method."""
    return {
        parameter_property(method, p.name): parameter_blender_property(method, p)
        for method, cls in METHODS.items()
        for p in cls.parameters
    }


JacobianIKSettings.__annotations__.update(_parameter_properties())

classes = (JacobianIKStashedConstraint, JacobianIKGoal, JacobianIKSettings)

# parameters renamed when each name got one meaning (``damping`` is lambda, squared where used):
# LM's constant damping W_N and Chan-Lawrence factor kept their values under their new names
RENAMED = {
    "lm_constant_damping": "lm_constant_w_n",
    "lm_chan_lawrence_damping": "lm_chan_lawrence_w_n_factor",
}
CHOICE_PROPERTIES = {
    parameter_property(method, p.name): p.choices
    for method, cls in METHODS.items()
    for p in cls.parameters
    if p.choices
}


def convert_stored(props: Any) -> bool:
    """Convert settings stored by older versions (renamed parameters, choices stored as text
    before they were enums) in place; True when anything changed."""
    changed = False
    for old, new in RENAMED.items():
        value = props.get(old)
        if value is not None:
            del props[old]
            setattr(props, new, float(value))
            changed = True
    for name, choices in CHOICE_PROPERTIES.items():
        value = props.get(name)
        if isinstance(value, str):
            del props[name]
            if value in choices:
                setattr(props, name, value)
            changed = True
    return changed


@persistent
def _convert_on_load(*_args: Any) -> None:
    for ob in bpy.data.objects:
        if ob.type == "ARMATURE" and ob.library is None:
            convert_stored(ob.jacobian_ik)


def register() -> None:
    for cls in classes:
        bpy.utils.register_class(cls)
    bpy.types.Object.jacobian_ik = PointerProperty(  # type: ignore[attr-defined,func-returns-value]
        type=JacobianIKSettings
    )
    bpy.app.handlers.load_post.append(_convert_on_load)


def unregister() -> None:
    if _convert_on_load in bpy.app.handlers.load_post:
        bpy.app.handlers.load_post.remove(_convert_on_load)
    del bpy.types.Object.jacobian_ik  # type: ignore[attr-defined]
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
