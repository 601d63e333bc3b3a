#!/usr/bin/env python3
"""Sinew's one entry point: set up, build, test, demo, bench, lint.

    python3 build.py demo     # make the 5.2 environment, build, bake the demo scene to out/
    python3 build.py test     # make every test environment and run the whole suite
    python3 build.py build    # write the installable zips to dist/
    python3 build.py bench    # side-by-side benchmarks against Blender's own solvers
    python3 build.py lint     # ruff + mypy (fake-bpy-module) in a lint environment
    python3 build.py kernels  # compile the C kernels (core/kernels/src) for every platform

Standard library only until it has made its environments. Environments live under
``.venv/`` and are reused while their requirements are unchanged (a stamp file
records them).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
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
    # zig as a C cross-compiler (its own libc headers and stubs for every target).
    "tools": {
        "python": "3.13",
        "packages": ["ziglang==0.17.1"],
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

# The C kernels: every core/kernels/src/*.c into one shared library per platform, named
# core/kernels/lib/sinew_kernels-<tag>.<ext> (the name core/kernels/__init__.py loads).
KERNEL_SRC = ROOT / "core" / "kernels" / "src"
KERNEL_LIB = ROOT / "core" / "kernels" / "lib"
KERNEL_TARGETS: dict[str, tuple[str, str, str]] = {  # platform: (tag, zig target, extension)
    "linux-x64": ("linux_x64", "x86_64-linux-gnu.2.17", "so"),
    "windows-x64": ("windows_x64", "x86_64-windows-gnu", "dll"),
    "macos-arm64": ("macos_arm64", "aarch64-macos.11.0", "dylib"),
    "macos-x64": ("macos_x64", "x86_64-macos.11.0", "dylib"),
}
# -O2: -O3 measured no faster on these kernels (docs/BUILD.md). No -ffast-math: the
# kernels test isfinite(). Entry points are marked SINEW_API (default visibility / dllexport).
KERNEL_FLAGS = ["-std=c11", "-O2", "-shared", "-fvisibility=hidden", "-s"]
# The sanitizer build (the asan tier): Debian's gcc, AddressSanitizer + UBSan, abort on any report.
ASAN_DIR = BUILD / "asan"
SANITIZER_EXIT = 86  # the exit code of a process that a sanitizer report ended
ASAN_FLAGS = ["-std=c11", "-O1", "-g", "-fsanitize=address,undefined", "-fno-omit-frame-pointer",
              "-fno-sanitize-recover=all", "-shared", "-fPIC", "-fvisibility=hidden"]


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


# --------------------------------------------------------------------------- kernels


def kernel_library(platform: str) -> Path:
    """Where the kernel library of ``platform`` ('linux-x64') is written in the source tree."""
    tag, _target, ext = KERNEL_TARGETS[platform]
    return KERNEL_LIB / f"sinew_kernels-{tag}.{ext}"


def _kernel_sources() -> list[Path]:
    sources = sorted(KERNEL_SRC.glob("*.c"))
    if not sources:
        raise BuildError(f"no C sources in {KERNEL_SRC.relative_to(ROOT)}")
    return sources


def _inputs_digest(recipe: list[str]) -> str:
    digest = hashlib.sha256(json.dumps(recipe).encode())
    for f in sorted(KERNEL_SRC.glob("*.[ch]")):
        digest.update(f.name.encode() + b"\0" + f.read_bytes())
    return digest.hexdigest()


def _up_to_date(out: Path, recipe: list[str]) -> bool:
    """``out`` was built from today's sources and headers with ``recipe`` (the compiler and
    its flags) and is still the file that build wrote (a stamp next to it says so)."""
    stamp = out.with_name(out.name + ".stamp")
    if not (out.is_file() and stamp.is_file()):
        return False
    try:
        want = json.loads(stamp.read_text())
    except ValueError:
        return False
    return (want.get("inputs") == _inputs_digest(recipe)
            and want.get("output") == hashlib.sha256(out.read_bytes()).hexdigest())


def _compile(out: Path, recipe: list[str], cmd: list) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    run(cmd, cwd=out.parent)
    say(f"{out.relative_to(ROOT)}: {out.stat().st_size / 1e3:.0f} KB in {time.monotonic() - start:.1f} s")
    stamp = out.with_name(out.name + ".stamp")
    stamp.write_text(json.dumps({"inputs": _inputs_digest(recipe),
                                 "output": hashlib.sha256(out.read_bytes()).hexdigest()}))


def build_kernels(platforms: list[str] | None = None) -> dict[str, Path]:
    """Compile core/kernels/src/*.c with zig for each platform into core/kernels/lib/.

    A no-op (not even the tool environment is checked) when each library is there and was
    built from today's sources with today's flags. zig keeps the C runtimes it builds in its
    global cache (~/.cache/zig), so only the very first Windows build is slow.
    """
    platforms = platforms or list(KERNEL_TARGETS)
    sources = _kernel_sources()
    libs: dict[str, Path] = {}
    for platform in platforms:
        tag, target, _ext = KERNEL_TARGETS[platform]
        lib = kernel_library(platform)
        flags = list(KERNEL_FLAGS)
        if "-windows" not in target:
            flags.append("-fPIC")
        link = ["-lm"] if "-linux-" in target else []
        # Built in build/kernels/<tag>/ (zig also leaves .lib and .pdb files there for
        # Windows); only the library itself is copied into the source tree.
        out = BUILD / "kernels" / tag / lib.name
        recipe = ["zig", *ENVIRONMENTS["tools"]["packages"], target, *flags, *link]
        if not _up_to_date(out, recipe):
            zig = ensure_venv("tools")
            _compile(out, recipe, [zig, "-m", "ziglang", "cc", "-target", target, *flags, "-o", out, *sources, *link])
        if not lib.is_file() or lib.read_bytes() != out.read_bytes():
            KERNEL_LIB.mkdir(parents=True, exist_ok=True)
            tmp = lib.with_name(lib.name + ".tmp")
            shutil.copy2(out, tmp)
            os.replace(tmp, lib)
        libs[platform] = lib
    return libs


def build_asan_kernels() -> Path:
    """The Linux library built by Debian's gcc with AddressSanitizer and UBSan (build/asan/)."""
    if not shutil.which("gcc"):
        ensure_apt(["gcc"], "the sanitizer tier")
    sources = _kernel_sources()
    out = ASAN_DIR / "sinew_kernels-linux_x64.so"
    version = subprocess.run(["gcc", "-dumpfullversion"], capture_output=True, text=True).stdout.strip()
    recipe = ["gcc", version, *ASAN_FLAGS, "-lm"]
    if not _up_to_date(out, recipe):
        _compile(out, recipe, ["gcc", *ASAN_FLAGS, "-o", out, *sources, "-lm"])
    return out


def sanitizer_runtime() -> str:
    """gcc's AddressSanitizer runtime, to LD_PRELOAD into the Python that loads the library."""
    path = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not path or not Path(path).is_file():
        raise BuildError("gcc's libasan.so was not found (Debian: apt-get install gcc)")
    return str(Path(path).resolve())


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


# Never staged: caches, and build artefacts of the C kernels (object files, import libraries).
STAGE_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".mypy_cache", "*.o", "*.obj", "*.a", "*.lib",
                                      "*.exp", "*.pdb", "*.ilk", "*.dSYM", "*.tmp", "*.stamp")


def _stage_ignore(directory: str, names: list[str]) -> set[str]:
    ignored = set(STAGE_IGNORE(directory, names))
    if Path(directory).resolve() == KERNEL_LIB.resolve():
        ignored |= set(names)  # the libraries are added per zip by stage_addon
    return ignored


def stage_addon(dest: Path, kernel_libs: list[Path]) -> None:
    """Copy the add-on package (with ``core`` resolved into it) to ``dest``, with exactly
    ``kernel_libs`` in its core/kernels/lib/."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(ROOT / "blender_addon", dest, symlinks=False, ignore=_stage_ignore)
    set_stage_kernels(dest, kernel_libs)


def set_stage_kernels(dest: Path, kernel_libs: list[Path]) -> None:
    lib_dir = dest / KERNEL_LIB.relative_to(ROOT)
    if lib_dir.exists():
        shutil.rmtree(lib_dir)
    lib_dir.mkdir(parents=True)
    for lib in kernel_libs:
        shutil.copy2(lib, lib_dir / lib.name)


def build(platforms: list[str] | None = None) -> dict[str, Path]:
    """Write the extension zips (one per platform) and the legacy zip to dist/.

    Each platform's zip carries that platform's scipy wheels and kernel library only; the
    legacy zip carries the kernel libraries of every platform built (all four by default).
    """
    platforms = platforms or list(WHEEL_PLATFORMS)
    libs = build_kernels(platforms)
    py = ensure_venv("bpy-5.2")
    tool = blender_ext_tool(py)
    wheels = download_wheels(py, platforms)

    DIST.mkdir(exist_ok=True)
    for old in DIST.glob(f"{ADDON_ID}-*.zip"):
        old.unlink()
    stage = BUILD / "stage" / ADDON_ID
    stage_addon(stage, [])
    source_manifest = (stage / "blender_manifest.toml").read_text()
    zips: dict[str, Path] = {}
    # blender_ext.py's --split-platforms splits the wheels only, not other files: so each
    # platform's zip is built from the stage holding that platform's library and wheels.
    for platform in platforms:
        set_stage_kernels(stage, [libs[platform]])
        own = [w for w in wheels if _wheel_platform(w) == platform]
        if (stage / "wheels").exists():
            shutil.rmtree(stage / "wheels")
        (stage / "wheels").mkdir()
        for whl in own:
            shutil.copy2(whl, stage / "wheels" / whl.name)
        wheel_list = ",\n".join(f'  "./wheels/{w.name}"' for w in own)
        generated = f'platforms = ["{platform}"]\nwheels = [\n{wheel_list},\n]\n\n'
        # Top-level keys must come before the first [table] of the TOML file.
        first_table = re.search(r"^\[", source_manifest, re.M)
        cut = first_table.start() if first_table else len(source_manifest)
        (stage / "blender_manifest.toml").write_text(source_manifest[:cut] + generated + source_manifest[cut:])
        run([py, tool, "build", "--source-dir", stage, "--output-dir", DIST, "--split-platforms"])
        hits = list(DIST.glob(f"{ADDON_ID}-{VERSION}-{platform.replace('-', '_')}.zip"))
        if len(hits) != 1:
            raise BuildError(f"blender_ext.py did not write the {platform} zip (dist/ has {os.listdir(DIST)})")
        run([py, tool, "validate", hits[0]])
        zips[platform] = hits[0]

    legacy = DIST / f"{ADDON_ID}-{VERSION}-legacy.zip"
    legacy_stage = BUILD / "stage-legacy" / ADDON_ID
    stage_addon(legacy_stage, [libs[p] for p in platforms])
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
    if name == "asan":
        # Capture only Python's sys.stdout/err: a sanitizer writes its report to file
        # descriptor 2 and ends the process, so pytest's fd capture would swallow it.
        pytest_args = ["--capture=sys", *pytest_args]
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
    # Skipping is not passing: a skipped or empty tier fails the command. A pytest process
    # that crashed or was ended by a sanitizer (no JUnit file, or a part of one) fails it too.
    counts["ok"] = proc.returncode == 0 and counts["skipped"] == 0 and counts["passed"] > 0
    return counts


def asan_tier_env() -> dict[str, str]:
    """The environment of the asan tier: the sanitizer build of the kernels, loaded through
    SINEW_KERNELS_LIB into Debian's python3 with gcc's ASan runtime preloaded. Any report
    (ASan or UBSan) ends the process with exit code SANITIZER_EXIT, which fails the tier."""
    lib = build_asan_kernels()
    common = f"exitcode={SANITIZER_EXIT}:print_stacktrace=1"
    return {
        "SINEW_KERNELS_LIB": str(lib),
        "LD_PRELOAD": sanitizer_runtime(),
        "ASAN_OPTIONS": f"detect_leaks=0:halt_on_error=1:abort_on_error=0:{common}",
        "UBSAN_OPTIONS": f"halt_on_error=1:{common}",
    }


def test(args: argparse.Namespace) -> int:
    results: dict[str, dict] = {}
    problems: list[str] = []
    zips = build(["linux-x64"] if args.fast else None)
    extra = {"SINEW_ZIP": str(zips["linux-x64"]), "SINEW_LEGACY_ZIP": str(zips["legacy"])}
    pytest_args = list(args.pytest_args or [])

    tiers: list[tuple[str, str, list[str]]] = []
    tier_env: dict[str, dict[str, str]] = {}
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
    if not args.tier or "asan" in args.tier:
        # The kernel tests again, and the VBD solver's and its self-contact's (every kernel on
        # real scenes), against
        # the AddressSanitizer + UBSan build of the library.
        kernel_tests = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "core").glob("test_kernels*.py"))
        kernel_tests += [str(p.relative_to(ROOT)) for name in ("test_springs_vbd.py", "test_selfcontact.py")
                         for p in (ROOT / "tests" / "core").glob(name)]
        try:
            if not kernel_tests:
                raise BuildError("there are no kernel tests (tests/core/test_kernels*.py)")
            ensure_apt(APT_PACKAGES, "the sanitizer tier")
            tier_env["asan"] = asan_tier_env()
            tiers.append(("asan", "/usr/bin/python3", ["tests/asan", *kernel_tests]))
        except (BuildError, subprocess.CalledProcessError) as exc:
            problems.append(f"tier asan cannot run: {exc}")
    if (not args.tier or "ui" in args.tier) and (ROOT / "tests" / "ui").is_dir():
        try:
            ensure_apt(APT_PACKAGES + APT_UI_PACKAGES, "the UI tier")
            tiers.append(("ui", "/usr/bin/python3", ["tests/ui"]))
        except (BuildError, subprocess.CalledProcessError) as exc:
            problems.append(f"tier ui cannot run: {exc}")

    for name, py, paths in tiers:
        results[name] = run_tier(name, py, paths, {**extra, **tier_env.get(name, {})}, pytest_args)

    print()
    total_pass = total_fail = 0
    for name, c in results.items():
        status = "ok" if c["ok"] else "FAILED"
        if c["returncode"] == SANITIZER_EXIT and name == "asan":
            status += ": a sanitizer report ended pytest (see above)"
        elif c["returncode"] not in (0, 1):
            status += f": pytest exited {c['returncode']}"
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
    p_test.add_argument("--tier", action="append", choices=["bpy-5.2", "bpy-4.5", "blender-bin", "asan", "ui"],
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
    p_kernels = sub.add_parser("kernels", help="compile the C kernels into core/kernels/lib/ (all platforms)")
    p_kernels.add_argument("--platform", action="append", choices=list(KERNEL_TARGETS))
    p_kernels.add_argument("--asan", action="store_true", help="also the sanitizer build in build/asan/")
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
        if args.command == "kernels":
            for platform, lib in build_kernels(args.platform).items():
                say(f"{platform:12s} {lib.relative_to(ROOT)}  {lib.stat().st_size / 1e3:.0f} KB")
            if args.asan:
                say(f"sanitizer build: {build_asan_kernels().relative_to(ROOT)}")
            return 0
        if args.command == "setup":
            ensure_venv("bpy-5.2")
            ensure_venv("bpy-4.5")
            ensure_venv("tools")
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
