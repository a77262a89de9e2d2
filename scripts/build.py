"""Build the extension zips users install: one per platform, each carrying the numba and llvmlite
wheels of that platform for Blender's Pythons (3.11 for Blender 4.2-5.1, 3.13 for 5.2), so the
solver's compiled loop (solvers/kernel.py) needs nothing but the zip. Platforms without wheels
get a zip without them (the numpy loop runs there).

    .venv/bin/python scripts/build.py [--platforms linux-x64,windows-x64] [--out dist]

The wheels are downloaded from PyPI into a staging copy under build/ (never into the checkout);
the manifest of the staging copy gains ``platforms`` and ``wheels``; Blender's own extension tool
(shipped in the bpy wheel) validates and builds with ``--split-platforms``. Prints each zip's
size. ``--no-wheels`` builds the same zips without downloading (what a test can run offline).
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PINS = ("numba==0.68.1", "llvmlite==0.50.0")
PYTHONS = ("3.11", "3.13")
PLATFORMS = {  # Blender's platform name: pip's platform tags (newest first)
    "linux-x64": ("manylinux_2_28_x86_64", "manylinux2014_x86_64"),
    "windows-x64": ("win_amd64",),
    "macos-arm64": ("macosx_14_0_arm64", "macosx_12_0_arm64", "macosx_11_0_arm64"),
    "macos-x64": ("macosx_10_15_x86_64", "macosx_10_9_x86_64"),
    "windows-arm64": ("win_arm64",),
}


def blender_ext() -> Path:
    """Blender's extension tool, as the bpy wheel ships it (without importing bpy)."""
    spec = importlib.util.find_spec("bpy")
    base = Path(spec.origin if spec and spec.origin else "").parent
    found = sorted(base.glob("*/scripts/addons_core/bl_pkg/cli/blender_ext.py"))
    if not found:
        raise SystemExit("blender_ext.py not found in the bpy wheel")
    return found[-1]


SKIP = (".git", "build", "dist", "__pycache__")


def stage(out: Path) -> Path:
    """A copy of the files git tracks (what a clean clone has; without git, every file but
    venvs, builds and caches), under ``out``."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode == 0:
        files = listed.stdout.split("\0")
    else:
        files = [
            str(p.relative_to(ROOT))
            for p in ROOT.rglob("*")
            if p.is_file()
            and not any(
                part in SKIP or part.startswith(".venv") for part in p.relative_to(ROOT).parts
            )
        ]
    dest = out / "jacobian_ik"
    if dest.exists():
        shutil.rmtree(dest)
    for name in filter(None, files):
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    return dest


def download(dest: Path, platform: str) -> list[Path]:
    """The pinned wheels of ``platform`` for every Python in PYTHONS ([] where none exist)."""
    got: list[Path] = []
    for py in PYTHONS:
        for tag in PLATFORMS[platform]:
            before = set(dest.glob("*.whl"))
            cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
            cmd += ["--only-binary=:all:", "--platform", tag, "--python-version", py]
            cmd += ["--implementation", "cp", "-d", str(dest), *PINS]
            if subprocess.run(cmd, capture_output=True).returncode == 0:
                got += sorted(set(dest.glob("*.whl")) - before) or [
                    w for w in dest.glob("*.whl") if f"cp{py.replace('.', '')}" in w.name
                ]
                break
    return sorted(set(got))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platforms", default=",".join(PLATFORMS))
    parser.add_argument("--out", type=Path, default=ROOT / "dist")
    parser.add_argument("--no-wheels", action="store_true")
    args = parser.parse_args(argv)
    platforms = [p.strip() for p in args.platforms.split(",") if p.strip()]
    unknown = set(platforms) - set(PLATFORMS)
    if unknown:
        parser.error(f"unknown platforms {sorted(unknown)}; known: {', '.join(PLATFORMS)}")
    src = stage(ROOT / "build" / "stage")
    wheels: list[Path] = []
    if not args.no_wheels:
        folder = src / "wheels"
        folder.mkdir()
        for platform in platforms:
            found = download(folder, platform)
            print(f"{platform}: {', '.join(w.name for w in found) or 'no wheels (numpy loop)'}")
            wheels += found
    manifest = src / "blender_manifest.toml"
    text = manifest.read_text()
    head, build = text.split("[build]", 1)
    extra = f"platforms = {platforms!r}\n".replace("'", '"')
    if wheels:
        listed = ",\n".join(f'  "./wheels/{w.name}"' for w in sorted(set(wheels)))
        extra += f"wheels = [\n{listed},\n]\n"
    manifest.write_text(head.rstrip() + "\n\n" + extra + "\n[build]" + build)
    args.out.mkdir(parents=True, exist_ok=True)
    tool = [sys.executable, str(blender_ext())]
    subprocess.run([*tool, "validate", str(src)], check=True)
    cmd = [*tool, "build", "--source-dir", str(src), "--output-dir", str(args.out)]
    subprocess.run([*cmd, "--split-platforms"], check=True)
    for z in sorted(args.out.glob("jacobian_ik-*.zip")):
        print(f"{z.name}: {z.stat().st_size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
