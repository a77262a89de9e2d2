"""Goal operators: add one for the active bone, remove one, import Blender's IK constraints
(stashed on the goals) and restore them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import bpy
from bpy.props import BoolProperty, IntProperty, StringProperty
from mathutils import Matrix

from .. import preload_kernel
from ..bridge import poles, rig, stash
from ..bridge.write import animated_paths
from . import poll

if TYPE_CHECKING:
    from bpy.stub_internal.rna_enums import OperatorReturnItems


class JACOBIAN_IK_OT_add_goal(bpy.types.Operator):
    """Add a goal for the active bone, with a new Empty at its tail (aligned with it) as target"""

    bl_idname = "jacobian_ik.add_goal"
    bl_label = "Add IK Goal"
    bl_options = {"REGISTER", "UNDO"}  # noqa: RUF012

    bone: StringProperty(name="Bone", description="Bone to pull (default: the active bone)")  # type: ignore[valid-type]
    chain_length: IntProperty(  # type: ignore[valid-type]
        name="Chain Length",
        description="Bones the solver may rotate (0: to the root)",
        default=2,
        min=0,
    )
    use_tail: BoolProperty(name="Use Tail", default=True)  # type: ignore[valid-type]

    @classmethod
    def poll(cls, context: Any) -> bool:
        return poll.armature(cls, context)

    def execute(self, context: Any) -> set[OperatorReturnItems]:
        ob = context.object
        name = self.bone
        if not name:
            active = context.active_pose_bone or ob.data.bones.active
            name = active.name if active is not None else ""
        if not name:
            self.report({"ERROR"}, "No bone given and no active bone")
            return {"CANCELLED"}
        pbone = ob.pose.bones.get(name) if ob.pose is not None else None
        if pbone is None:
            self.report({"ERROR"}, f"Armature {ob.name!r} has no bone {name!r}")
            return {"CANCELLED"}

        offset = Matrix.Translation((0.0, pbone.bone.length if self.use_tail else 0.0, 0.0))
        empty = bpy.data.objects.new(f"IK {name}", None)
        empty.empty_display_type = "ARROWS"
        empty.empty_display_size = max(pbone.bone.length * 0.3, 1e-3)
        empty.matrix_world = ob.matrix_world @ pbone.matrix @ offset
        collection = ob.users_collection[0] if ob.users_collection else context.scene.collection
        collection.objects.link(empty)

        props = ob.jacobian_ik
        goal = props.goals.add()
        goal.bone = name
        goal.target = empty
        goal.chain_length = self.chain_length
        goal.use_tail = self.use_tail
        props.active_goal_index = len(props.goals) - 1
        self.report({"INFO"}, f"Added goal for {name!r} with target {empty.name!r}")
        preload_kernel()  # the first solve need not load the compiled loops
        return {"FINISHED"}


class JACOBIAN_IK_OT_remove_goal(bpy.types.Operator):
    """Remove the active goal (its target object stays; an IK constraint stashed on it goes back
    on its bone)"""

    bl_idname = "jacobian_ik.remove_goal"
    bl_label = "Remove IK Goal"
    bl_options = {"REGISTER", "UNDO"}  # noqa: RUF012

    index: IntProperty(name="Index", description="Goal to remove (-1: the active one)", default=-1)  # type: ignore[valid-type]

    @classmethod
    def poll(cls, context: Any) -> bool:
        if not poll.armature(cls, context):
            return False
        if not context.object.jacobian_ik.goals:
            cls.poll_message_set("The armature has no goals")
            return False
        return True

    def execute(self, context: Any) -> set[OperatorReturnItems]:
        props = context.object.jacobian_ik
        index = props.active_goal_index if self.index < 0 else self.index
        if not 0 <= index < len(props.goals):
            self.report({"ERROR"}, f"No goal {index}; the armature has {len(props.goals)}")
            return {"CANCELLED"}
        store = props.goals[index].stash
        if store.stored:  # nothing is lost: the IK constraint it came from goes back
            ob = context.object
            if store.bone not in ob.pose.bones:
                self.report(
                    {"ERROR"},
                    f"The goal holds the IK constraint {store.name!r} of bone {store.bone!r}, "
                    "which is gone: restore or keep the goal",
                )
                return {"CANCELLED"}
            con = stash.restore(ob, store, stash.stashed_before(props.goals, store))
            self.report({"INFO"}, f"Put IK constraint {con.name!r} back on {store.bone!r}")
        props.goals.remove(index)
        props.active_goal_index = max(0, min(props.active_goal_index, len(props.goals) - 1))
        return {"FINISHED"}


def _unsupported(ob: Any, con: Any) -> str:
    """Why an IK constraint cannot become a goal ("" when it can): a vertex group as its target
    or pole (Blender's IK aims at the group's centre; a goal would take the object's origin),
    or iTaSC's Distance mode (it keeps a distance, it has no target point)."""
    for role, target, sub in (
        ("target", con.target, con.subtarget),
        ("pole", con.pole_target, con.pole_subtarget),
    ):
        if target is not None and sub and target.type != "ARMATURE":
            return (
                f"its {role} is vertex group {sub!r} of {target.name!r}, which goals do not "
                "support (use an Empty or a bone)"
            )
    if ob.pose.ik_solver == "ITASC" and con.ik_type == "DISTANCE":
        return "an iTaSC Distance constraint keeps a distance, it has no target point"
    return ""


def _goal_from(ob: Any, pbone: Any, con: Any) -> Any:
    """A new goal of ``ob`` with IK constraint ``con``'s bone, target, chain, tail, stretch and
    pole (its weights are the caller's)."""
    goal = ob.jacobian_ik.goals.add()
    goal.bone = pbone.name
    goal.target = con.target
    goal.target_bone = con.subtarget if con.target.type == "ARMATURE" else ""
    goal.chain_length = con.chain_count
    goal.use_tail = con.use_tail
    goal.use_transform_locks = False  # as Blender's IK: only the IK locks
    goal.use_stretch = con.use_stretch
    pole = con.pole_target
    if pole is not None:
        goal.pole_target = pole
        goal.pole_target_bone = con.pole_subtarget if pole.type == "ARMATURE" else ""
        # the side the chain bends to, as Blender's pole angle sets it
        goal.pole_angle = poles.blender_pole_angle(ob, goal, con.pole_angle)
    return goal


IMPORTED_MAX_STRETCH = 10.0
"""Max Stretch after importing a constraint that stretches: Blender's IK stretches its bones
without a bound (iksolver_plugin.cc: IK_SetLimit(seg, IK_TRANS_Y, 0.001, 1e10)); at the default
of 2, a generated Rigify rig whose IK controls were dragged about 1 m out missed them by up to
0.73 m where Blender's IK met them."""


def _stretch_as_blender(ob: Any, goals: list[Any]) -> str:
    """Raise the armature's Max Stretch to ``IMPORTED_MAX_STRETCH`` when an imported goal
    stretches a bone: Stretch on and a bone of its chain with IK Stretch. What was done, or
    ""."""
    props, pbones = ob.jacobian_ik, ob.pose.bones
    if props.max_stretch >= IMPORTED_MAX_STRETCH:
        return ""
    names = [n for g in goals if g.use_stretch for n in rig.chain_names(ob, g)]
    stretching = [n for n in names if pbones[n].ik_stretch > 0.0]
    if not stretching:
        return ""
    old, props.max_stretch = props.max_stretch, IMPORTED_MAX_STRETCH
    return (
        f"Max Stretch raised from {old:g} to {IMPORTED_MAX_STRETCH:g}, as Blender's IK "
        f"stretches {stretching[0]!r} and the chains' other IK Stretch bones without a bound"
    )


class JACOBIAN_IK_OT_import_constraints(bpy.types.Operator):
    """Add one goal per IK constraint of the armature (pole included) and stash the constraints
    it converted on their goals: removed from the bones, restorable with Restore IK Constraints"""

    bl_idname = "jacobian_ik.import_constraints"
    bl_label = "Import IK Constraints"
    bl_options = {"REGISTER", "UNDO"}  # noqa: RUF012

    @classmethod
    def poll(cls, context: Any) -> bool:
        return poll.armature(cls, context)

    def execute(self, context: Any) -> set[OperatorReturnItems]:
        ob = context.object
        if ob.pose is None:
            self.report({"ERROR"}, f"Armature {ob.name!r} has no pose yet")
            return {"CANCELLED"}
        props = ob.jacobian_ik
        converted, skipped = [], []
        animated = animated_paths(ob)
        for pbone in ob.pose.bones:
            for index, con in enumerate(pbone.constraints):
                if con.type != "IK" or con.mute:
                    continue
                if con.target is None:
                    skipped.append(f"{pbone.name}/{con.name}: no target")
                    continue
                unsupported = _unsupported(ob, con)
                if unsupported:
                    skipped.append(f"{pbone.name}/{con.name}: {unsupported}, left as it is")
                    continue
                influence_animated = con.path_from_id("influence") in animated
                if con.influence <= 0.0 and not influence_animated:
                    skipped.append(f"{pbone.name}/{con.name}: influence 0 (off), left as it is")
                    continue
                if con.influence < 1.0 or influence_animated:
                    how = "animated" if influence_animated else f"{con.influence:.2f}"
                    skipped.append(
                        f"{pbone.name}/{con.name}: influence {how}; the goal is solved at full "
                        "influence on every frame (Blender blends its IK pose with the animated "
                        "one): turn the goal off where IK should be off"
                    )
                # Blender's IK scales a goal's error and Jacobian rows by its weight, so its
                # least-squares weight is the square (intern/iksolver IK_QTask.cpp: SetBetas
                # and SetDerivatives by m_weight); ours weighs the squared error (solvers)
                position_weight = con.weight**2 if con.use_location else 0.0
                rotation_weight = con.orient_weight**2 if con.use_rotation else 0.0
                if position_weight <= 0.0 and rotation_weight <= 0.0:
                    skipped.append(f"{pbone.name}/{con.name}: neither location nor rotation")
                    continue
                goal = _goal_from(ob, pbone, con)
                goal.position_weight = position_weight
                goal.rotation_weight = rotation_weight
                stash.stash(con, pbone.name, index, goal.stash)
                converted.append((pbone, con))
        # removed after the loop: the stack indexes kept above are the original ones
        for pbone, con in converted:
            pbone.constraints.remove(con)
        for message in skipped:
            self.report({"WARNING"}, message)
        if not converted:
            why = " (see the warnings)" if skipped else ""
            self.report(
                {"ERROR"},
                f"Armature {ob.name!r}: no IK constraint imported: none is unmuted with a target "
                f"a goal can take{why}",
            )
            return {"CANCELLED"}
        props.active_goal_index = len(props.goals) - 1
        self.report(
            {"INFO"},
            f"Imported {len(converted)} IK constraint(s) as goals; they are stashed on the "
            "goals (Restore IK Constraints puts them back)",
        )
        stretch = _stretch_as_blender(ob, list(props.goals)[-len(converted) :])
        if stretch:
            self.report({"INFO"}, stretch)
        preload_kernel()
        return {"FINISHED"}


class JACOBIAN_IK_OT_restore_constraints(bpy.types.Operator):
    """Put the IK constraints stashed by Import IK Constraints back on their bones, as they
    were (settings, name, place in the stack), and remove the goals made from them"""

    bl_idname = "jacobian_ik.restore_constraints"
    bl_label = "Restore IK Constraints"
    bl_options = {"REGISTER", "UNDO"}  # noqa: RUF012

    keep_goals: BoolProperty(  # type: ignore[valid-type]
        name="Keep Goals", description="Keep the goals made from the constraints", default=False
    )

    @classmethod
    def poll(cls, context: Any) -> bool:
        if not poll.armature(cls, context):
            return False
        if not any(g.stash.stored for g in context.object.jacobian_ik.goals):
            cls.poll_message_set("No goal holds a stashed IK constraint")
            return False
        return True

    def execute(self, context: Any) -> set[OperatorReturnItems]:
        ob = context.object
        props = ob.jacobian_ik
        stored = [i for i, g in enumerate(props.goals) if g.stash.stored]
        if not stored:
            self.report({"ERROR"}, "No goal holds a stashed IK constraint")
            return {"CANCELLED"}
        missing = sorted({props.goals[i].stash.bone for i in stored} - set(ob.pose.bones.keys()))
        if missing:
            self.report({"ERROR"}, f"Armature {ob.name!r} has no bone {missing[0]!r} any more")
            return {"CANCELLED"}
        # per bone in the order of the stack, so that each goes back to its own place
        for i in sorted(stored, key=lambda i: props.goals[i].stash.index):
            stash.restore(ob, props.goals[i].stash)
        if not self.keep_goals:
            for i in reversed(stored):
                props.goals.remove(i)
            props.active_goal_index = max(0, min(props.active_goal_index, len(props.goals) - 1))
        self.report({"INFO"}, f"Restored {len(stored)} IK constraint(s)")
        return {"FINISHED"}
