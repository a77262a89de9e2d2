#!/usr/bin/env bash
# The one test command: set-up, lint, format check, type check, then the whole pytest suite.
# Extra arguments go to pytest (e.g. scripts/test.sh -k solver -x).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The checkout is the add-on package: mypy and pytest need its folder name to be a Python
# identifier. A clone into e.g. "jacobian-ik" is tested from a copy named jacobian_ik.
if ! [[ "$(basename "$PWD")" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
  copy="$(mktemp -d)/jacobian_ik"
  mkdir "$copy"
  tar --exclude=./.venv -cf - . | tar -xf - -C "$copy"
  ln -s "$PWD/.venv" "$copy/.venv"
  [ -d ../shared ] && ln -s "$(cd .. && pwd)/shared" "$(dirname "$copy")/shared"
  cd "$copy"
  echo "(testing a copy in $copy: the folder name $(basename "$OLDPWD") is not a Python identifier)"
fi
echo "== ruff"; .venv/bin/ruff check . && .venv/bin/ruff format --check .
echo "== mypy"; .venv/bin/mypy
echo "== pytest"; .venv/bin/python -m pytest "$@"
# In CI (or with JIK_TEST42=1) the Blender and solver tests run again on the 4.2 LTS line.
if [ -n "${CI:-}" ] || [ -n "${JIK_TEST42:-}" ]; then
  echo "== pytest on bpy 4.2"; bash scripts/test42.sh
fi
