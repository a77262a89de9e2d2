#!/usr/bin/env bash
# The one test command: set-up, lint, format check, type check, then the whole pytest suite.
# Extra arguments go to pytest (e.g. scripts/test.sh -k solver -x).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "== ruff"; .venv/bin/ruff check . && .venv/bin/ruff format --check .
echo "== mypy"; .venv/bin/mypy
echo "== pytest"; .venv/bin/python -m pytest "$@"
