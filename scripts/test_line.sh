#!/usr/bin/env bash
# One Blender line's tests: the Blender and solver tests on that line's bpy from PyPI, in its own
# venv (.venv-<line>, created from the pins below on first use, about 400 MB; reused after; in
# $JIK_VENVS when set).
# The 5.0 line is the dev venv (.venv, requirements-dev.txt), which scripts/test.sh tests.
#
#   bash scripts/test_line.sh 4.5            # every Blender and solver test on bpy 4.5.15
#   bash scripts/test_line.sh 5.2 -k bake    # extra arguments go to pytest
#
# The last line printed is "line <line> (bpy <version>, Python <x.y>, numpy <v>): N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."
line=${1:?usage: scripts/test_line.sh 4.2|4.5|5.0|5.2 [pytest args]}
shift
common="pytest==9.2.0 hypothesis==6.170.15 numba==0.68.1 llvmlite==0.50.0"
case $line in
  # numpy as each Blender bundles it; matplotlib for the mocap test's plot
  4.2) bpy=4.2.23 py=3.11 pins="numpy==1.26.4 matplotlib==3.9.4" ;;
  4.5) bpy=4.5.15 py=3.11 pins="numpy==1.26.4 matplotlib==3.9.4" ;;
  5.0) bpy=5.0.1 py=3.11 pins="numpy==1.26.4 matplotlib==3.9.4" ;;
  5.2) bpy=5.2.3 py=3.13 pins="numpy==2.5.5 matplotlib==3.11.2" ;;
  *) echo "unknown Blender line '$line' (4.2, 4.5, 5.0 or 5.2)" >&2; exit 2 ;;
esac

# The Python this line's wheels are built for: PYTHON311/PYTHON313, pythonX.Y on PATH, or pyenv's
# (a candidate counts only if it runs: pyenv's shims exist for versions that are not active).
find_python() {
  local v=$1 var="PYTHON${1/./}" root p
  root=$( (pyenv root 2>/dev/null) || echo "$HOME/.pyenv")
  for p in "${!var:-}" "$(command -v "python$v" || true)" "$root"/versions/"$v".*/bin/python"$v"; do
    if [ -n "$p" ] && [ -x "$p" ] && "$p" -c "import sys; assert sys.version_info[:2] == (${v/./, })" \
      2>/dev/null; then
      echo "$p"
      return
    fi
  done
  return 1
}
if ! PY=$(find_python "$py"); then
  echo "line $line (bpy $bpy): FAILED: no Python $py found (set PYTHON${py/./}, put python$py" \
    "on PATH, or install it with pyenv); bpy $bpy wheels exist for Python $py only" >&2
  echo "line $line (bpy $bpy): 0 passed, 1 failed"
  exit 1
fi

venv=${JIK_VENVS:-.}/.venv-$line  # JIK_VENVS: where scripts/test.sh keeps them when it tests a copy
# A failed set-up (download, pip, a broken venv) still ends with this line's result line.
trap 'echo "line $line (bpy $bpy): FAILED: setting up $venv failed" >&2; echo "line $line (bpy $bpy): 0 passed, 1 failed"' ERR
want="bpy==$bpy $pins $common"
if [ "$line" = 5.0 ]; then
  venv=.venv  # the dev venv (requirements-dev.txt pins bpy 5.0.1)
  bash scripts/setup.sh
elif ! [ -x "$venv/bin/python" ] || [ "$(cat "$venv/.requirements" 2>/dev/null)" != "$want" ]; then
  echo "setting up $venv with $PY ($want)..."
  rm -rf "$venv"
  "$PY" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  # shellcheck disable=SC2086
  "$venv/bin/python" -m pip install --quiet $want
  echo "$want" > "$venv/.requirements"
fi
versions=$("$venv/bin/python" -c \
  "import bpy, numpy, sys; print(f'bpy {bpy.app.version_string}, Python {sys.version_info[0]}.{sys.version_info[1]}, numpy {numpy.__version__}')")
trap - ERR

# Some bpy builds crash (4.2) or hang (4.5) when the interpreter exits after the tests:
# JIK_HARD_EXIT makes tests/conftest.py end the process right after pytest's summary, and the
# line is judged by that summary (python -u: written at once, not lost in a pipe buffer).
log=$(mktemp)
JIK_LINE=$line JIK_HARD_EXIT=1 "$venv/bin/python" -u -m pytest tests/blender tests/solvers -q -p no:cacheprovider \
  -W ignore::DeprecationWarning "$@" | tee "$log" || true
summary=$(grep -E "[0-9]+ (passed|failed|errors?)( |,|$)" "$log" | tail -n 1)
passed=$(grep -oE "[0-9]+ passed" <<<"$summary" | grep -oE "[0-9]+" || echo 0)
failed=$(( $(grep -oE "[0-9]+ failed" <<<"$summary" | grep -oE "[0-9]+" || echo 0) \
  + $(grep -oE "[0-9]+ errors?" <<<"$summary" | grep -oE "[0-9]+" || echo 0) ))
rm -f "$log"
if [ "$passed" -eq 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi  # no summary: it crashed
echo "line $line ($versions): $passed passed, $failed failed"
[ "$failed" -eq 0 ]
