"""The asan tier runs what it claims to run.

``python3 build.py test`` runs the kernel tests (tests/core/test_kernels*.py) a second time
in Debian's python3 with gcc's AddressSanitizer runtime preloaded and SINEW_KERNELS_LIB naming
the sanitizer build of the library (build/asan/). These tests check that set-up: the runtime
is in the process, the library loaded is the instrumented one, and a sanitizer report ends
the process with the exit code that fails the tier.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.environ.get("SINEW_TIER") != "asan",
                                reason="only in the asan tier of `python3 build.py test`")

SANITIZER_EXIT = 86  # build.py's SANITIZER_EXIT


def test_the_sanitizer_runtime_is_in_this_process():
    assert "libasan" in os.environ.get("LD_PRELOAD", "")
    everything = ctypes.CDLL(None)
    assert hasattr(everything, "__asan_init")
    assert "detect_leaks=0" in os.environ["ASAN_OPTIONS"]
    assert "halt_on_error=1" in os.environ["UBSAN_OPTIONS"]


def test_the_kernels_loaded_are_the_sanitizer_build():
    import core.kernels as kernels

    wanted = Path(os.environ["SINEW_KERNELS_LIB"]).resolve()
    assert wanted.parent.name == "asan" and wanted.is_file()
    assert Path(kernels.library_path()).resolve() == wanted
    lib = kernels.library()
    assert lib.sinew_abi_version() == kernels.ABI_VERSION
    mapped = Path("/proc/self/maps").read_text()
    assert str(wanted) in mapped
    # Instrumented code calls the ASan and UBSan runtimes: both are mapped beside it.
    assert "libasan" in mapped and "libubsan" in mapped


def test_a_report_ends_the_process_with_the_tiers_exit_code():
    """A load 8 bytes past the end of a numpy array, reported as instrumented code reports it:
    the process ends at once with SANITIZER_EXIT, which run_tier counts as a failure."""
    code = ("import ctypes, numpy\n"
            "a = numpy.zeros(4)\n"
            "ctypes.CDLL(None).__asan_report_load8(ctypes.c_void_p(a.ctypes.data + a.nbytes))\n"
            "print('still running')\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == SANITIZER_EXIT, res.stderr[-2000:]
    assert "ERROR: AddressSanitizer" in res.stderr
    assert "still running" not in res.stdout
