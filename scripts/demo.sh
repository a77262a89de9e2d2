#!/usr/bin/env bash
# The demo, in two parts:
# 1. a 20-bone character with animated IK targets for hands and feet, 250 frames baked with
#    Jacobian IK: saves demo.blend, prints the report (also in demo_report.json);
# 2. real motion on a real rig: the CMU walk (../shared/data) retargeted onto Rigify's human
#    meta-rig through goals on hands, feet and head: saves demo_mocap.blend, prints the report
#    (also in demo_mocap/). scripts/mocap.sh runs part 2 alone and updates benchmarks/results.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python scripts/demo.py "$@"
if [ -f ../shared/data/cmu-131-01-walk.bvh ]; then
  .venv/bin/python scripts/mocap.py --out demo_mocap --blend demo_mocap.blend
else
  echo "(../shared/data/cmu-131-01-walk.bvh not found: the mocap part is skipped)"
fi
