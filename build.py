#!/usr/bin/env python3
"""Sinew's one entry point: set up, build, test, demo, bench, lint.

    python3 build.py demo     # make the 5.2 environment, build, bake the demo scene to out/
    python3 build.py test     # make every test environment and run the whole suite
    python3 build.py build    # write the installable zips to dist/
    python3 build.py bench    # side-by-side benchmarks against Blender's own solvers
    python3 build.py lint     # ruff + mypy (fake-bpy-module) in a lint environment

Standard library only until it has made its environments. Environments live under
``.venv/`` and are reused while their requirements are unchanged (a stamp file
records them).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
DIST = ROOT / "dist"
BUILD = ROOT / "build"
OUT = ROOT / "out"

VERSION = "0.1.0"
ADDON_ID = "sinew"

# The bpy module tiers: Blender as a Python module, one per supported LTS line.
ENVIRONMENTS: dict[str, dict] = {
    "bpy-5.2": {
        "python": "3.13",
        "packages": ["bpy==5.2.3", "numpy>=2", "scipy", "pytest", "hypothesis", "matplotlib"],
    },
    "bpy-4.5": {
        "python": "3.11",
        "packages": ["bpy==4.5.*", "numpy<2", "scipy", "pytest", "hypothesis", "matplotlib"],
    },
    "lint": {
        "python": "3.13",
        "packages": ["ruff", "mypy", "fake-bpy-module-latest", "numpy>=2", "scipy", "pytest", "hypothesis"],
    },
    "bench": {
        "python": "3.13",
        "packages": ["bpy==5.2.3", "numpy>=2", "scipy", "matplotlib", "ikpy"],
    },
}

# Debian's blender binary (3.4.1 on bookworm) and what its system Python needs.
APT_PACKAGES = ["blender", "python3-numpy", "python3-scipy", "python3-pytest", "python3-hypothesis"]
APT_UI_PACKAGES = ["xvfb", "xauth"]

# scipy wheels carried by the extension zips: Blender ships numpy but not scipy.
SCIPY_VERSION = "1.15.3"
WHEEL_PLATFORMS = {
    "linux-x64": ["manylinux_2_17_x86_64", "manylinux2014_x86_64"],
    "windows-x64": ["win_amd64"],
    "macos-arm64": ["macosx_14_0_arm64"],
    "macos-x64": ["macosx_10_14_x86_64"],
}
WHEEL_PYTHONS = ["3.11", "3.13"]


# --------------------------------------------------------------------------- helpers


class BuildError(RuntimeError):
    """A step that cannot go on; the message says what is missing."""


def say(msg: str) -> None:
    print(f"[build] {msg}", flush=True)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    say("$ " + " ".join(str(c) for c in cmd))
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def find_python(version: str) -> str:
    """Return a working interpreter for ``version`` ('3.13'), or raise BuildError.

    Tries ``pythonX.Y`` on PATH (which may be a pyenv shim that fails unless the version
    is selected, so each candidate is run), then pyenv's versions folder, then /usr/bin.
    """
    candidates: list[str] = []
    on_path = shutil.which(f"python{version}")
    if on_path:
        candidates.append(on_path)
    roots = []
    if os.environ.get("PYENV_ROOT"):
        roots.append(os.environ["PYENV_ROOT"])
    pyenv = shutil.which("pyenv")
    if pyenv:
        try:
            roots.append(subprocess.run([pyenv, "root"], capture_output=True, text=True).stdout.strip())
        except OSError:
            pass
    roots.append(str(Path.home() / ".pyenv"))
    for root in roots:
        if root:
            candidates += sorted(glob.glob(f"{root}/versions/{version}.*/bin/python"), reverse=True)
    candidates.append(f"/usr/bin/python{version}")
    for cand in candidates:
        try:
            ok = subprocess.run(
                [cand, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True, text=True, timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if ok.returncode == 0 and ok.stdout.strip() == version:
            return cand
    raise BuildError(
        f"Python {version} is needed but was not found (looked for python{version} on PATH, "
        f"under pyenv's versions folder and in /usr/bin). Install it, e.g. `pyenv install {version}`."
    )


def venv_python(name: str) -> Path:
    return VENV / name / "bin" / "python"


def ensure_venv(name: str) -> Path:
    """Create (or reuse, when its stamp matches) the environment ``.venv/<name>``."""
    spec = ENVIRONMENTS[name]
    stamp_data = json.dumps({"python": spec["python"], "packages": spec["packages"]}, sort_keys=True)
    path = VENV / name
    stamp = path / "sinew-stamp.json"
    py = venv_python(name)
    if stamp.is_file() and stamp.read_text() == stamp_data and py.exists():
        check = subprocess.run([str(py), "-c", "import sys"], capture_output=True)
        if check.returncode == 0:
            return py
    base = find_python(spec["python"])
    if path.exists():
        shutil.rmtree(path)
    say(f"creating environment {name} with Python {spec['python']} ({base})")
    run([base, "-m", "venv", path])
    run([py, "-m", "pip", "install", "--disable-pip-version-check", "-q", "--upgrade", "pip"])
    run([py, "-m", "pip", "install", "--disable-pip-version-check", "-q", *spec["packages"]])
    stamp.write_text(stamp_data)
    return py


def apt_missing(packages: list[str]) -> list[str]:
    missing = []
    for pkg in packages:
        res = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
        if "install ok installed" not in res.stdout:
            missing.append(pkg)
    return missing


def ensure_apt(packages: list[str], why: str) -> None:
    """Install Debian packages when missing (as root); otherwise say what is missing."""
    if not shutil.which("dpkg-query"):
        raise BuildError(f"{why} needs the Debian packages {' '.join(packages)}; this system has no dpkg.")
    missing = apt_missing(packages)
    if not missing:
        return
    if os.geteuid() != 0:
        raise BuildError(
            f"{why} needs the Debian packages {' '.join(missing)}; run as root or "
            f"`sudo apt-get install {' '.join(missing)}`."
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    run(["apt-get", "update", "-q"], env=env)
    run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing], env=env)
    still = apt_missing(packages)
    if still:
        raise BuildError(f"apt-get could not install {' '.join(still)}.")


def blender_ext_tool(py: Path) -> Path:
    """Blender's extension tool, shipped inside the bpy wheel."""
    found = glob.glob(str(py.parent.parent / "lib/python*/site-packages/bpy/*/scripts/addons_core/bl_pkg/cli/blender_ext.py"))
    if not found:
        raise BuildError("blender_ext.py was not found inside the bpy wheel of the 5.2 environment.")
    return Path(found[0])


# --------------------------------------------------------------------------- build


def download_wheels(py: Path, platforms: list[str]) -> list[Path]:
    """scipy wheels for each Blender platform and Python (cached under build/wheels)."""
    wheel_dir = BUILD / "wheels"
    wheel_dir.mkdir(parents=True, exist_ok=True)
    found: list[Path] = []
    for platform in platforms:
        tags = WHEEL_PLATFORMS[platform]
        for pyver in WHEEL_PYTHONS:
            abi = "cp" + pyver.replace(".", "")
            pattern = f"scipy-{SCIPY_VERSION}-{abi}-{abi}-*.whl"
            have = [Path(p) for p in glob.glob(str(wheel_dir / pattern)) if _wheel_platform(Path(p)) == platform]
            if not have:
                cmd = [py, "-m", "pip", "download", "--disable-pip-version-check", "-q", "--no-deps",
                       "--only-binary=:all:", "--python-version", pyver, "-d", wheel_dir]
                for tag in tags:
                    cmd += ["--platform", tag]
                run([*cmd, f"scipy=={SCIPY_VERSION}"])
                have = [Path(p) for p in glob.glob(str(wheel_dir / pattern)) if _wheel_platform(Path(p)) == platform]
            if not have:
                raise BuildError(f"no scipy {SCIPY_VERSION} wheel for {platform} / Python {pyver}")
            found.append(sorted(have)[-1])
    return found


def _wheel_platform(wheel: Path) -> str:
    name = wheel.name
    if "win_amd64" in name:
        return "windows-x64"
    if "macosx" in name and "arm64" in name:
        return "macos-arm64"
    if "macosx" in name and "x86_64" in name:
        return "macos-x64"
    if "linux" in name and "x86_64" in name:
        return "linux-x64"
    return "other"


def stage_addon(dest: Path) -> None:
    """Copy the add-on package (with ``core`` resolved into it) to ``dest``."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(
        ROOT / "blender_addon", dest, symlinks=False,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".mypy_cache"),
    )


def build(platforms: list[str] | None = None) -> dict[str, Path]:
    """Write the extension zips (one per platform) and the legacy zip to dist/."""
    platforms = platforms or list(WHEEL_PLATFORMS)
    py = ensure_venv("bpy-5.2")
    tool = blender_ext_tool(py)
    wheels = download_wheels(py, platforms)

    stage = BUILD / "stage" / ADDON_ID
    stage_addon(stage)
    (stage / "wheels").mkdir()
    for whl in wheels:
        shutil.copy2(whl, stage / "wheels" / whl.name)
    manifest = (stage / "blender_manifest.toml").read_text()
    wheel_list = ",\n".join(f'  "./wheels/{w.name}"' for w in wheels)
    plat_list = ", ".join(f'"{p}"' for p in platforms)
    generated = f"platforms = [{plat_list}]\nwheels = [\n{wheel_list},\n]\n\n"
    # Top-level keys must come before the first [table] of the TOML file.
    first_table = re.search(r"^\[", manifest, re.M)
    cut = first_table.start() if first_table else len(manifest)
    manifest = manifest[:cut] + generated + manifest[cut:]
    (stage / "blender_manifest.toml").write_text(manifest)

    DIST.mkdir(exist_ok=True)
    for old in DIST.glob(f"{ADDON_ID}-*.zip"):
        old.unlink()
    run([py, tool, "build", "--source-dir", stage, "--output-dir", DIST, "--split-platforms"])
    zips: dict[str, Path] = {}
    for platform in platforms:
        hits = list(DIST.glob(f"{ADDON_ID}-{VERSION}-{platform.replace('-', '_')}.zip"))
        if len(hits) != 1:
            raise BuildError(f"blender_ext.py did not write the {platform} zip (dist/ has {os.listdir(DIST)})")
        run([py, tool, "validate", hits[0]])
        zips[platform] = hits[0]

    legacy = DIST / f"{ADDON_ID}-{VERSION}-legacy.zip"
    legacy_stage = BUILD / "stage-legacy" / ADDON_ID
    stage_addon(legacy_stage)
    (legacy_stage / "blender_manifest.toml").unlink()
    with zipfile.ZipFile(legacy, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(legacy_stage.rglob("*")):
            if f.is_file():
                zf.write(f, Path(ADDON_ID) / f.relative_to(legacy_stage))
    zips["legacy"] = legacy
    for name, path in zips.items():
        say(f"{name:12s} {path.relative_to(ROOT)}  {path.stat().st_size / 1e6:.1f} MB")
    return zips


# --------------------------------------------------------------------------- test


def _junit_counts(xml_path: Path) -> dict[str, int]:
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if not xml_path.is_file():
        return counts
    root = ET.parse(xml_path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    for suite in suites:
        for key in counts:
            counts[key] += int(suite.get(key, 0))
    return counts


def run_tier(name: str, python: str, paths: list[str], env_extra: dict[str, str], pytest_args: list[str]) -> dict:
    xml = BUILD / f"junit-{name}.xml"
    xml.parent.mkdir(exist_ok=True)
    if xml.exists():
        xml.unlink()
    env = dict(os.environ, **env_extra, SINEW_TIER=name, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    say(f"tier {name}: {python} -m pytest {' '.join(paths)}")
    start = time.monotonic()
    proc = subprocess.run(
        [python, "-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={xml}", *pytest_args, *paths],
        cwd=ROOT, env=env,
    )
    counts = _junit_counts(xml)
    counts["failed"] = counts["failures"] + counts["errors"]
    counts["passed"] = counts["tests"] - counts["failed"] - counts["skipped"]
    counts["seconds"] = time.monotonic() - start
    counts["returncode"] = proc.returncode
    # Skipping is not passing: a skipped or empty tier fails the command.
    counts["ok"] = proc.returncode == 0 and counts["skipped"] == 0 and counts["passed"] > 0
    return counts


def test(args: argparse.Namespace) -> int:
    results: dict[str, dict] = {}
    problems: list[str] = []
    zips = build(["linux-x64"] if args.fast else None)
    extra = {"SINEW_ZIP": str(zips["linux-x64"]), "SINEW_LEGACY_ZIP": str(zips["legacy"])}
    pytest_args = list(args.pytest_args or [])

    tiers: list[tuple[str, str, list[str]]] = []
    for env_name in ("bpy-5.2", "bpy-4.5"):
        if args.tier and env_name not in args.tier:
            continue
        try:
            py = str(ensure_venv(env_name))
        except (BuildError, subprocess.CalledProcessError) as exc:
            problems.append(f"tier {env_name} cannot run: {exc}")
            continue
        tiers.append((env_name, py, ["tests/core", "tests/blender"]))
    if not args.tier or "blender-bin" in args.tier:
        try:
            ensure_apt(APT_PACKAGES, "the blender-binary tier")
            blender = shutil.which("blender")
            if not blender:
                raise BuildError("the `blender` command is not on PATH after installing Debian's blender")
            extra["SINEW_BLENDER"] = blender
            tiers.append(("blender-bin", "/usr/bin/python3", ["tests/core", "tests/cli"]))
        except (BuildError, subprocess.CalledProcessError) as exc:
            problems.append(f"tier blender-bin cannot run: {exc}")
    if (not args.tier or "ui" in args.tier) and (ROOT / "tests" / "ui").is_dir():
        try:
            ensure_apt(APT_PACKAGES + APT_UI_PACKAGES, "the UI tier")
            tiers.append(("ui", "/usr/bin/python3", ["tests/ui"]))
        except (BuildError, subprocess.CalledProcessError) as exc:
            problems.append(f"tier ui cannot run: {exc}")

    for name, py, paths in tiers:
        results[name] = run_tier(name, py, paths, extra, pytest_args)

    print()
    total_pass = total_fail = 0
    for name, c in results.items():
        status = "ok" if c["ok"] else "FAILED"
        print(f"tier {name}: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped "
              f"in {c['seconds']:.0f} s ({status})")
        total_pass += c["passed"]
        total_fail += c["failed"] + (0 if c["ok"] or c["failed"] else 1)
    for p in problems:
        print(p)
        total_fail += 1
    print(f"TOTAL: {total_pass} passed, {total_fail} failed")
    return 0 if not problems and all(c["ok"] for c in results.values()) and results else 1


# --------------------------------------------------------------------------- demo, bench, lint


def demo(args: argparse.Namespace) -> int:
    py = ensure_venv("bpy-5.2")
    zips = build(["linux-x64"])
    OUT.mkdir(exist_ok=True)
    cmd = [str(py), "-m", "tools.demo", "--out", str(OUT), "--zip", str(zips["linux-x64"])]
    if args.quick:
        cmd.append("--quick")
    return subprocess.run(cmd, cwd=ROOT).returncode


def bench(args: argparse.Namespace) -> int:
    OUT.mkdir(exist_ok=True)
    zips = build(["linux-x64"])
    code = 0
    versions = args.blender or ["5.2"]
    for version in versions:
        name = "bench" if version == "5.2" else f"bpy-{version}"
        if name not in ENVIRONMENTS:
            raise BuildError(f"no benchmark environment for Blender {version} (choose 5.2 or 4.5)")
        py = ensure_venv(name)
        cmd = [str(py), str(ROOT / "tools" / "bench.py"), "--out", str(OUT), "--label", version]
        if args.quick:
            cmd.append("--quick")
        env = dict(os.environ, SINEW_ZIP=str(zips["linux-x64"]))
        code |= subprocess.run(cmd, cwd=ROOT, env=env).returncode
    return code


def lint(args: argparse.Namespace) -> int:
    py = ensure_venv("lint")
    code = subprocess.run([str(py), "-m", "ruff", "check", "."], cwd=ROOT).returncode
    code |= subprocess.run([str(py), "-m", "mypy"], cwd=ROOT).returncode
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p_test = sub.add_parser("test", help="make every test environment and run the whole suite")
    p_test.add_argument("--tier", action="append", choices=["bpy-5.2", "bpy-4.5", "blender-bin", "ui"],
                        help="run only these tiers (default: all)")
    p_test.add_argument("--fast", action="store_true", help="build only the linux-x64 zip")
    p_test.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    p_build = sub.add_parser("build", help="write the installable zips to dist/")
    p_build.add_argument("--platform", action="append", choices=list(WHEEL_PLATFORMS))
    p_demo = sub.add_parser("demo", help="bake the embedded demo scene to out/")
    p_demo.add_argument("--quick", action="store_true", help="a shortened frame range")
    p_bench = sub.add_parser("bench", help="benchmarks against Blender's own solvers")
    p_bench.add_argument("--quick", action="store_true", help="small sizes, finishes in under 2 minutes")
    p_bench.add_argument("--blender", action="append", choices=["5.2", "4.5"])
    sub.add_parser("lint", help="ruff + mypy")
    sub.add_parser("setup", help="make the environments only")
    args = parser.parse_args(argv)
    try:
        if args.command == "test":
            return test(args)
        if args.command == "build":
            build(args.platform)
            return 0
        if args.command == "demo":
            return demo(args)
        if args.command == "bench":
            return bench(args)
        if args.command == "lint":
            return lint(args)
        if args.command == "setup":
            ensure_venv("bpy-5.2")
            ensure_venv("bpy-4.5")
            ensure_apt(APT_PACKAGES, "the blender-binary tier")
            return 0
    except BuildError as exc:
        print(f"build.py: {exc}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as exc:
        print(f"build.py: a step failed: {' '.join(map(str, exc.cmd))} (exit {exc.returncode})", file=sys.stderr)
        return 1
    return 1


if __name__ == "__main__":
    sys.exit(main())
