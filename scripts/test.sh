#!/usr/bin/env bash
# The one test command: set-up, lint, format check, type check, then the whole pytest suite on the
# dev venv (bpy 5.0.1). In CI (CI set) or with JIK_TEST_ALL=1 the Blender and solver tests then run
# on every supported Blender line (scripts/test_line.sh: 4.2, 4.5 and 5.2 besides 5.0), one result
# line each, and a last line sums them up. Extra arguments go to pytest (e.g. scripts/test.sh -k bake).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The checkout is the add-on package: mypy and pytest need its folder name to be a Python
# identifier. A clone into e.g. "jacobian-ik" is tested from a copy named jacobian_ik.
# The copy is removed when this script ends; the other lines' venvs (scripts/test_line.sh) stay
# in the checkout (JIK_VENVS), reused by the next run (each copy kept them: 3.9 GB a run).
if ! [[ "$(basename "$PWD")" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  copy="$tmp/jacobian_ik"
  mkdir "$copy"
  tar --exclude='./.venv*' -cf - . | tar -xf - -C "$copy"
  ln -s "$PWD/.venv" "$copy/.venv"  # the other lines' venvs: JIK_VENVS below
  [ -d ../shared ] && ln -s "$(cd .. && pwd)/shared" "$tmp/shared"
  export JIK_VENVS="$PWD"
  cd "$copy"
  echo "(testing a copy in $copy: the folder name $(basename "$OLDPWD") is not a Python identifier)"
fi
echo "== ruff"; .venv/bin/ruff check . && .venv/bin/ruff format --check .
echo "== mypy"; .venv/bin/mypy
if [ -z "${CI:-}" ] && [ -z "${JIK_TEST_ALL:-}" ]; then
  echo "== pytest"
  status=0
  .venv/bin/python -m pytest "$@" || status=$?
  exit $status
fi

# The matrix: every line runs even when one fails; each prints one result line.
start=$SECONDS
results=()
status=0
log=$(mktemp)
echo "== pytest, line 5.0 (the dev venv: every test, benchmarks' smoke tests included)"
.venv/bin/python -u -m pytest -p no:cacheprovider "$@" | tee "$log" || true
summary=$(grep -E "[0-9]+ (passed|failed|errors?)( |,|$)" "$log" | tail -n 1)
p=$(grep -oE "[0-9]+ passed" <<<"$summary" | grep -oE "[0-9]+" || echo 0)
f=$(( $(grep -oE "[0-9]+ failed" <<<"$summary" | grep -oE "[0-9]+" || echo 0) \
  + $(grep -oE "[0-9]+ errors?" <<<"$summary" | grep -oE "[0-9]+" || echo 0) ))
[ "$p" -eq 0 ] && [ "$f" -eq 0 ] && f=1
results+=("line 5.0 ($(.venv/bin/python -c "import bpy, numpy, sys; print(f'bpy {bpy.app.version_string}, Python {sys.version_info[0]}.{sys.version_info[1]}, numpy {numpy.__version__}')")): $p passed, $f failed")
[ "$f" -eq 0 ] || status=1
for line in 4.2 4.5 5.2; do
  echo "== pytest, line $line"
  t=$SECONDS
  if bash scripts/test_line.sh "$line" "$@" | tee "$log"; then :; else status=1; fi
  results+=("$(tail -n 1 "$log") [$((SECONDS - t)) s]")
done
rm -f "$log"
echo
echo "== Blender lines ($((SECONDS - start)) s)"
total_p=0 total_f=0
for r in "${results[@]}"; do
  echo "$r"
  rp=$(grep -oE "[0-9]+ passed" <<<"$r" | grep -oE "[0-9]+" || echo 0)
  rf=$(grep -oE "[0-9]+ failed" <<<"$r" | grep -oE "[0-9]+" || echo 0)
  total_p=$((total_p + rp)) total_f=$((total_f + rf))
done
echo "$total_p passed, $total_f failed"
exit $status
