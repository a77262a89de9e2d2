#!/usr/bin/env bash
# The demo: builds a 20-bone character with animated IK targets for hands and feet, bakes 250
# frames with Jacobian IK, saves demo.blend and prints the report (also in demo_report.json).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python scripts/demo.py "$@"
