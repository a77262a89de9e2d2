#!/usr/bin/env bash
# The Blender and solver tests on the 4.2 LTS line: creates .venv42 with bpy 4.2.x from PyPI
# (first run downloads about 400 MB), then runs pytest there. Extra arguments go to pytest.
# The 4.2 line has legacy actions (action.fcurves) instead of 5.0's layered actions.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}  # bpy 4.2 wheels exist for Python 3.11 only
BPY=${BPY_VERSION:-4.2.23}
want="bpy==$BPY numpy==1.26.4 pytest==9.2.0 hypothesis==6.170.15 matplotlib==3.9.4"  # numpy as Blender 4.2 bundles it
stamp=.venv42/.requirements
if ! [ -x .venv42/bin/python ] || ! [ -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setting up .venv42 ($want)..."
  "$PY" -m venv .venv42
  .venv42/bin/python -m pip install --quiet --upgrade pip
  # shellcheck disable=SC2086
  .venv42/bin/python -m pip install --quiet $want
  echo "$want" > "$stamp"
fi
.venv42/bin/python -c "import bpy; print('bpy', bpy.app.version_string)"
# bpy 4.2 segfaults when the interpreter exits after the tests: judge by pytest's summary line
# (python -u: written before the crash, not lost in a pipe buffer).
log=$(mktemp)
.venv42/bin/python -u -m pytest tests/blender tests/solvers -q -p no:cacheprovider -W ignore::DeprecationWarning "$@" | tee "$log" || true
tail -n 1 "$log" | grep -q " passed" && ! tail -n 1 "$log" | grep -qE "failed|error"
