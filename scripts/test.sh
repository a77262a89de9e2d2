#!/usr/bin/env bash
# The one test command: set-up, lint, format check, type check, then the whole pytest suite.
# Extra arguments go to pytest (e.g. scripts/test.sh -k solver -x).
set -euo pipefail
cd "$(dirname "$0")/.."
# The checkout is the add-on package: mypy and pytest need its folder name to be a Python
# identifier. A clone into e.g. "jacobian-ik" runs from a symlink named jacobian_ik instead.
if ! [[ "$(basename "$PWD")" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] && [ -z "${JIK_LINKED:-}" ]; then
  link="$(mktemp -d)/jacobian_ik"
  ln -s "$PWD" "$link"
  JIK_LINKED=1 exec bash "$link/scripts/test.sh" "$@"
fi
bash scripts/setup.sh
echo "== ruff"; .venv/bin/ruff check . && .venv/bin/ruff format --check .
echo "== mypy"; .venv/bin/mypy
echo "== pytest"; .venv/bin/python -m pytest "$@"
