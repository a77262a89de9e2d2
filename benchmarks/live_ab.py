"""Live speed before and after a change, side by side in one run: ``benchmarks/live.py`` of a base
commit and of this checkout, alternated process by process (the order swapped every round), so
both see the same machine load; medians over the rounds.

    .venv/bin/python benchmarks/live_ab.py --base a12bdc6 [--rounds 5] [--steps 300]
        [--playback 60] [--json out.json]

Each round runs, for each side, the default benchmark (``--steps`` target moves: the live
update, the handler's CPU time) and, with ``--playback FRAMES``, the playback benchmark (CPU
time per ``frame_set`` with Live, and the live update alone, on the humanoid and the meta-rig).
The base is exported with ``git archive`` into a temporary folder; both run with this Python.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DRAG_KEYS = ("update", "solve", "handler", "handler_cpu")
PLAY_KEYS = ("ours_cpu", "ours_update", "blender_cpu")


def export(commit: str, into: Path) -> Path:
    """The tree of ``commit`` in ``into`` (git archive)."""
    archive = subprocess.run(
        ["git", "archive", commit], cwd=ROOT, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def bench(checkout: Path, args: list[str], home: Path) -> Any:
    """Run ``checkout``'s benchmarks/live.py with ``args``; its JSON output."""
    out = home / "out.json"
    proc = subprocess.run(
        [sys.executable, str(checkout / "benchmarks" / "live.py"), *args, "--json", str(out)],
        cwd=checkout,
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home)},
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{checkout}: {proc.stderr[-2000:]}")
    return json.loads(out.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the commit to compare against")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--playback", type=int, default=0, metavar="FRAMES")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    rows: dict[str, dict[str, list[float]]] = {"base": {}, "new": {}}
    with tempfile.TemporaryDirectory(prefix="live_ab_") as tmp:
        (Path(tmp) / "base").mkdir()
        sides = {"base": export(args.base, Path(tmp) / "base"), "new": ROOT}
        for r in range(args.rounds):
            order = ["base", "new"] if r % 2 == 0 else ["new", "base"]
            for side in order:
                home = Path(tmp) / f"home_{side}"
                home.mkdir(exist_ok=True)
                drag = bench(sides[side], ["--steps", str(args.steps), "--repeats", "1"], home)
                for key in DRAG_KEYS:
                    rows[side].setdefault(key, []).append(drag[key]["median"])
                if args.playback:
                    play = bench(
                        sides[side], ["--playback", str(args.playback), "--repeats", "1"], home
                    )
                    for res in play:
                        for key in PLAY_KEYS:
                            name = f"{res['rig']} {key}"
                            rows[side].setdefault(name, []).append(res[key]["median"])
            print(f"round {r + 1} of {args.rounds} done", file=sys.stderr)
    print(f"benchmarks/live.py at {args.base} (base) and this checkout (new), {args.rounds} rounds")
    print(f"load average at start {load:.2f}, at end {os.getloadavg()[0]:.2f}")
    print(f"{'ms, median of the rounds medians':<34}{'base':>9}{'new':>9}{'new/base':>10}")
    summary: dict[str, Any] = {"base": args.base, "rounds": args.rounds, "rows": {}}
    for key in rows["new"]:
        b, n = float(np.median(rows["base"][key])), float(np.median(rows["new"][key]))
        print(f"{key:<34}{b:9.3f}{n:9.3f}{n / b:10.2f}")
        summary["rows"][key] = {"base": rows["base"][key], "new": rows["new"][key]}
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
