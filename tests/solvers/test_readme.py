"""The README's solver example runs as printed (so the documented API cannot drift)."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_solver_example_runs(capsys):
    text = README.read_text()
    section = text[text.index("## The solver from Python") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, str(README), "exec"), namespace)
    result = namespace["result"]
    assert list(result.reason) == ["converged", "converged"]
    assert result.position_error.max() <= 1e-6
    assert "converged" in capsys.readouterr().out
