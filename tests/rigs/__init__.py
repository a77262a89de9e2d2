"""Rigs shared by the tests and the benchmarks (the benchmarks import them from here).

- ``skeletons``: solver skeletons built with the public solver API (numpy only).
- ``zoo_rigs``: the rig zoo, generated from a seed (numpy only).
- ``scenes``: Blender scenes of a rig with IK constraints toward keyed Empties (bpy).
"""
