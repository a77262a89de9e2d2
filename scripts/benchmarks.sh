#!/usr/bin/env bash
# Regenerates benchmarks/results/report.md and its plots: set-up, the optional peers, the run.
# Extra arguments go to `python -m benchmarks.run` (e.g. --quick, --only sugihara,race).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The peers (roboticstoolbox-python, pybullet) are optional: benchmarks/requirements.txt pins
# them with all their dependencies and is installed with --no-deps, so it never replaces the
# numpy of requirements-dev.txt (roboticstoolbox 1.5.0's pgraph-python asks for numpy >= 2,
# which it does not need for IK). A failed install leaves the benchmark running without them.
stamp=.venv/.benchmarks-requirements.sha
want=$(sha256sum benchmarks/requirements.txt | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  if .venv/bin/python -m pip install --quiet --no-deps -r benchmarks/requirements.txt; then
    echo "$want" > "$stamp"
  else
    echo "warning: the optional benchmark peers did not install; running without them" >&2
  fi
fi
.venv/bin/python -m benchmarks.run "$@"
