#!/usr/bin/env bash
# pip install into a venv, retried from scratch when it fails: a download of Blender's wheel
# (about 400 MB) cut off midway fails even after pip's own resumes, and a fresh attempt gets it.
#   bash scripts/pip_install.sh .venv/bin/python -r requirements-dev.txt
set -euo pipefail
python=${1:?usage: scripts/pip_install.sh PYTHON PIP-INSTALL-ARGS...}
shift
attempts=${JIK_PIP_ATTEMPTS:-3}
for n in $(seq "$attempts"); do
  if "$python" -m pip install --quiet "$@"; then
    exit 0
  fi
  if [ "$n" -lt "$attempts" ]; then
    echo "pip install failed (attempt $n of $attempts); trying again in $((10 * n)) s" >&2
    sleep $((10 * n))
  fi
done
echo "pip install failed $attempts times" >&2
exit 1
