"""Every command the README shows runs as printed from a fresh copy of the checkout.

The README's commands are read from its shell blocks and its inline code (spans that start with
``bash``, ``.venv/bin/python`` or ``blender``; a continued line is one command). Each must have
an entry in SMOKE: the command to run, which starts with the printed command's program and
entry point, with small counts where the printed one takes minutes. A command added to the
README without an entry fails here. Each runs in its own copy of the tracked and untracked
(not ignored) files, named ``jacobian_ik``, with the dev venv linked as ``.venv``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PY = ".venv/bin/python"
STARTS = ("bash ", f"{PY} ", "blender ")
MAKE_RIG = f"{PY} scripts/demo.py > /dev/null && mv demo.blend rig.blend"


@dataclass(frozen=True)
class Smoke:
    command: str  # what runs, in the copy's root
    before: str = ""  # what the printed command expects to exist (e.g. its input file)
    shared: bool = False  # ../shared linked (the CMU clip, the papers' shapes)
    needs: str = ""  # a program on PATH, skipped without it
    env: tuple[tuple[str, str], ...] = ()


EXT = (
    f"{PY} .venv/lib/python3.11/site-packages/bpy/5.0/scripts/addons_core/bl_pkg/cli/blender_ext.py"
)
HEADLESS = (
    "blender -b rig.blend --python-expr \"import bpy; ob = bpy.data.objects['Armature']; "
    "bpy.context.view_layer.objects.active = ob; bpy.ops.jacobian_ik.bake(frame_start=1, "
    'frame_end=250); bpy.ops.wm.save_mainfile()"'
)
SMOKE: dict[str, Smoke] = {
    # the demo (its mocap part needs ../shared, not linked here: scripts/mocap.sh runs it)
    "bash scripts/demo.sh": Smoke("bash scripts/demo.sh"),
    "bash scripts/test.sh": Smoke(
        "bash scripts/test.sh --collect-only -q tests/test_import_name.py",
        env=(("CI", ""), ("JIK_TEST_ALL", "")),  # the quick line, also when CI runs this test
    ),
    "mkdir -p dist": Smoke("mkdir -p dist"),
    # the release zips without downloading numba's wheels (about 300 MB)
    f"{PY} scripts/build.py": Smoke(
        f"{PY} scripts/build.py --no-wheels --platforms linux-x64 --out dist"
        " && test -s dist/jacobian_ik-0.1.0-linux_x64.zip"
    ),
    # the README creates dist first (the line above)
    "blender --command extension build --source-dir . --output-dir dist": Smoke(
        "blender --command extension build --source-dir . --output-dir dist",
        before="mkdir -p dist",
        needs="blender",
    ),
    f"{EXT} build --source-dir . --output-dir dist": Smoke(
        f"{EXT} build --source-dir . --output-dir dist && test -s dist/jacobian_ik-*.zip",
        before="mkdir -p dist",
    ),
    HEADLESS: Smoke(HEADLESS.replace("250", "5"), before=MAKE_RIG, needs="blender"),
    f"{PY} scripts/bake.py rig.blend --start 1 --end 250 --method LM --output baked.blend": Smoke(
        f"{PY} scripts/bake.py rig.blend --start 1 --end 5 --method LM --output baked.blend",
        before=MAKE_RIG,
    ),
    f"{PY} scripts/full_body.py": Smoke(f"{PY} scripts/full_body.py"),
    "bash scripts/mocap.sh": Smoke("bash scripts/mocap.sh --frames 20 --out out", shared=True),
    "bash scripts/test_line.sh 4.5": Smoke(
        "bash scripts/test_line.sh 4.5 --collect-only -q tests/test_import_name.py",
        needs=".venv-4.5",
    ),
    "bash scripts/benchmarks.sh": Smoke(
        "bash scripts/benchmarks.sh --quick --only tabaczynski --out out",
        shared=True,  # the papers' shapes (../shared/reference)
        env=(("PIP_NO_INDEX", "1"),),  # the optional peers: no download in a test
    ),
    # the race needs the optional peers (benchmarks/requirements.txt): without them it skips
    # them and races ours alone
    f"{PY} -m benchmarks.run --only race": Smoke(
        f"{PY} -m benchmarks.run --quick --only race --out out", shared=True
    ),
    f"{PY} -m benchmarks.vs_blender": Smoke(
        f"{PY} -m benchmarks.vs_blender --quick --frames 4 --rigs C --out out"
    ),
    f"{PY} -m benchmarks.live": Smoke(f"{PY} -m benchmarks.live --steps 20 --repeats 1"),
    f"{PY} -m benchmarks.live --playback 100 --repeats 3": Smoke(
        f"{PY} -m benchmarks.live --playback 5 --repeats 1"
    ),
    # the base commit comes from git (the copy is not a repository: made one, its base itself)
    f"{PY} -m benchmarks.live_ab --base 7dd17e0 --rounds 5 --steps 300 --playback 40": Smoke(
        f"{PY} -m benchmarks.live_ab --base HEAD --rounds 1 --steps 5 --playback 3",
        before="git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm t",
    ),
    f"{PY} -m benchmarks.lean_bake": Smoke(f"{PY} -m benchmarks.lean_bake --frames 20"),
    f"{PY} -m benchmarks.lean_bake --zoo 5": Smoke(
        f"{PY} -m benchmarks.lean_bake --zoo 1 --frames 10"
    ),
    f"{PY} -m benchmarks.long_bake": Smoke(f"{PY} -m benchmarks.long_bake --frames 20"),
    f"{PY} -m benchmarks.zoo --seed 808 --count 20 --repeats 3": Smoke(
        f"{PY} -m benchmarks.zoo --seed 808 --count 1 --frames 4 --out out"
    ),
    f"{PY} -m benchmarks.zoo --seed 101 --count 20": Smoke(
        f"{PY} -m benchmarks.zoo --seed 101 --count 1 --frames 4 --out out"
    ),
    f"{PY} -m benchmarks.zoo --seed 8080 --count 20 --threads 1": Smoke(
        f"{PY} -m benchmarks.zoo --seed 8080 --count 1 --frames 4 --threads 1 --out out"
    ),
    f"{PY} -m benchmarks.zoo --seed 1919 --count 3 --kinds long_tentacle --frames 100": Smoke(
        f"{PY} -m benchmarks.zoo --seed 1919 --count 1 --kinds long_tentacle --frames 4 --out out"
    ),
    f"{PY} -m benchmarks.zoo --seed 5151 --count 6 --kinds snake": Smoke(
        f"{PY} -m benchmarks.zoo --seed 5151 --count 1 --kinds snake --frames 4 --out out"
    ),
    f"{PY} -m benchmarks.zoo --seed 5454 --count 10 --kinds creature": Smoke(
        f"{PY} -m benchmarks.zoo --seed 5454 --count 1 --kinds creature --frames 4 --out out"
    ),
    f"{PY} -m benchmarks.rigify_ik": Smoke(
        f"{PY} -m benchmarks.rigify_ik --frames 3 --repeats 1 --steps 3"
    ),
    f"{PY} -m benchmarks.blas_threads --seed 2121 --only 0,5,10 --limits": Smoke(
        f"{PY} -m benchmarks.blas_threads --seed 2121 --only 0 --limits --frames 4 --repeats 1"
    ),
    f"{PY} -m benchmarks.sugihara --seed 0 --count 1000 --json": Smoke(
        f"{PY} -m benchmarks.sugihara --seed 0 --count 5 --json"
    ),
}


def readme_commands(text: str) -> list[str]:
    """The commands of the README's ``sh`` blocks (comments dropped, continued lines joined)
    and of its inline code spans that start like a command, white space folded."""
    found: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.split(" # ")[0].strip()
            if line and not line.startswith("#"):
                found.append(line)
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for span in re.findall(r"`([^`]+)`", prose):
        span = " ".join(span.replace("\\\n", " ").split())
        if span.startswith(STARTS):
            found.append(span)
    return list(dict.fromkeys(" ".join(c.split()) for c in found))


COMMANDS = readme_commands(README.read_text())


def entry(command: str) -> list[str]:
    """The program and what it runs: ``bash X``, ``python -m M`` or ``python X``, ``blender``
    (of the first command of an ``&&`` list)."""
    words = shlex.split(command.split(" && ")[0])
    if words[0] == PY:
        return words[:3] if words[1] == "-m" else words[:2]
    return words[:2] if words[0] == "bash" else words[:1]


def test_the_readme_shows_commands_and_each_has_a_smoke_version() -> None:
    assert len(COMMANDS) >= 15, COMMANDS
    missing = [c for c in COMMANDS if c not in SMOKE]
    assert not missing, f"README commands with no smoke version in SMOKE: {missing}"
    stale = [c for c in SMOKE if c not in COMMANDS]
    assert not stale, f"SMOKE entries the README no longer shows: {stale}"
    for printed, smoke in SMOKE.items():
        assert entry(smoke.command) == entry(printed), printed


def test_the_reader_finds_blocks_spans_and_continued_lines() -> None:
    text = (
        "Run `bash scripts/x.sh --a 1` or\n`.venv/bin/python -m benchmarks.y\n--b 2`; "
        "`python3.13` is a file name, `scripts/x.sh` a path.\n\n"
        "```sh\nbash scripts/z.sh   # a comment\n.venv/bin/python tool.py \\\n    --c 3\n```\n"
    )
    assert readme_commands(text) == [
        "bash scripts/z.sh",
        ".venv/bin/python tool.py --c 3",
        "bash scripts/x.sh --a 1",
        ".venv/bin/python -m benchmarks.y --b 2",
    ]


def fresh_copy(tmp_path: Path, shared: bool) -> Path:
    """The checkout's files (tracked, and untracked but not ignored) in ``tmp/jacobian_ik``."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "-co", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    copy = tmp_path / "jacobian_ik"
    for name in filter(None, files):
        source = ROOT / os.fsdecode(name)
        if source.is_file() and not source.is_symlink():
            target = copy / os.fsdecode(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    for venv in ROOT.glob(".venv*"):
        (copy / venv.name).symlink_to(venv.resolve())
    if shared and (ROOT.parent / "shared").exists():
        (tmp_path / "shared").symlink_to((ROOT.parent / "shared").resolve())
    return copy


@pytest.mark.parametrize("printed", COMMANDS)
def test_a_readme_command_runs_from_a_fresh_copy(printed: str, tmp_path: Path) -> None:
    smoke = SMOKE.get(printed)
    if smoke is None:
        pytest.fail(f"no smoke version for {printed!r} (add it to SMOKE)")
    if smoke.needs.startswith(".venv"):
        if not (Path(os.environ.get("JIK_VENVS", ROOT)) / smoke.needs).exists():
            pytest.skip(f"{smoke.needs} is not set up (a 400 MB download; CI runs this line)")
    elif smoke.needs and shutil.which(smoke.needs) is None:
        pytest.skip(f"no {smoke.needs} on PATH")
    copy = fresh_copy(tmp_path, smoke.shared)
    env = {**os.environ, "HOME": str(tmp_path), **dict(smoke.env)}
    script = f"set -e; {smoke.before + '; ' if smoke.before else ''}{smoke.command}"
    proc = subprocess.run(
        ["bash", "-c", script], cwd=copy, capture_output=True, text=True, timeout=900, env=env
    )
    assert proc.returncode == 0, f"{smoke.command}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
