"""The README's solver example runs as printed (so the documented API cannot drift): in its own
Python from the repository root, where it imports the top-level ``solvers`` as the README says
(the tests themselves import the package as ``jacobian_ik`` only)."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

CHECKS = """
assert list(result.reason) == ["converged", "converged"], result.reason
assert result.position_error.max() <= 1e-6, result.position_error
"""


def test_readme_solver_example_runs():
    text = README.read_text()
    section = text[text.index("## The solver from Python") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    proc = subprocess.run(
        [sys.executable, "-c", code + CHECKS], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "converged" in proc.stdout
