"""The benchmarks: the papers' experiments, the peers, speed, and the comparisons with Blender's
own IK. Run them from the repository root as ``.venv/bin/python -m benchmarks.<name>`` (see the
README and docs/benchmarks.md).

They use the add-on by the one name the tests use too, ``jacobian_ik`` (this checkout, imported
unregistered; the Blender benchmarks register it), and the rigs the tests share (``tests.rigs``).
"""

from scripts.checkout import load_checkout

load_checkout(register=False)
