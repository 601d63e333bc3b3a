"""What the add-on needs beyond Blender itself, and a clear message when it is missing.

Blender ships numpy but not scipy. The extension zips carry scipy wheels; the legacy zip
relies on the system's scipy (Debian: ``python3-scipy``). Without scipy the add-on still
registers: panels and operators say what is missing instead of failing with a traceback.
"""

from __future__ import annotations

_status: str | None = None
_checked = False

SCIPY_HELP = (
    "Sinew needs scipy, which this Blender's Python does not have. Install the Sinew "
    "extension zip built for your platform (it carries scipy), or, for the legacy add-on "
    "on Linux, the system package (Debian/Ubuntu: apt install python3-scipy)."
)


def scipy_problem() -> str | None:
    """None when scipy is importable, else a one-line message saying what to do."""
    global _status, _checked
    if not _checked:
        try:
            import scipy.sparse  # noqa: F401
            import scipy.sparse.linalg  # noqa: F401
            import scipy.spatial  # noqa: F401
        except ImportError as exc:
            _status = f"{SCIPY_HELP} ({exc})"
        else:
            _status = None
        _checked = True
    return _status


def kernels_problem() -> str | None:
    """None when Sinew's compiled kernel library loads, else its one-line message (what to
    install). Checked on every call: cheap once loaded (the loader caches the library)."""
    try:
        from .core import kernels
    except ImportError as exc:  # numpy missing: scipy_problem says what to do
        return str(exc)
    try:
        kernels.library()
    except kernels.KernelsMissing as exc:
        return str(exc)
    return None
