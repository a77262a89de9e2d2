#!/usr/bin/env bash
# Real motion on a real rig: the CMU walk baked onto Rigify's human meta-rig with Jacobian IK
# (goals on hands, feet and head, knee and elbow poles); writes benchmarks/results/mocap_*.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python scripts/mocap.py "$@"
