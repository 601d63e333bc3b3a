"""One way to run a bake: synchronously in the background, modally with a window.

A bake is a :class:`BakeJob`: it reads everything it needs from the scene up front
(``__init__``), computes in small steps (``step``) without touching the scene, and only
then writes its result (``commit``). Cancelling before ``commit`` therefore leaves the
scene exactly as it was, and a failed ``commit`` rolls itself back.

:class:`BakeOperator` turns a job into an operator:

* ``execute`` (scripts, ``blender --background``): runs every step at once and prints a
  progress line every few percent to stdout;
* ``invoke`` with a window: a modal operator driven by a timer, progress in the status
  bar and the window's progress cursor, Esc cancels. ``bl_options`` contains ``'UNDO'``
  so one undo step restores the pre-bake scene.
"""

from __future__ import annotations

import time
from typing import Any

import bpy

# Time spent computing per timer tick in modal mode (seconds): keeps the UI responsive.
_SLICE = 0.05

# The last finished or failed bake: its one-line message, the operator and the object it
# ran on. The command line prints it; the panels show a failure on the object it concerns.
LAST_RESULT: dict[str, str] = {"summary": "", "error": "", "operator": "", "object": ""}


def last_error_for(operator: str, object_name: str) -> str:
    """The error of the last ``operator`` bake if it failed on ``object_name``, else ''."""
    if LAST_RESULT["operator"] == operator and LAST_RESULT["object"] == object_name:
        return LAST_RESULT["error"]
    return ""


class BakeJob:
    """A bake split into steps. Subclasses override the four methods below.

    Attributes
    ----------
    done, total : int
        Progress in the job's own units (usually frames).
    label : str
        Shown in progress lines, e.g. ``"IK Armature"``.
    """

    label = "Sinew bake"

    def __init__(self) -> None:
        self.done = 0
        self.total = 1

    def step(self) -> bool:
        """Do a small amount of work; return True when all computing is finished."""
        raise NotImplementedError

    def commit(self, context: bpy.types.Context) -> str:
        """Write the result to the scene and return a one-line summary for the report."""
        raise NotImplementedError

    def cancel(self) -> None:
        """Forget partial results (the scene has not been touched yet)."""

    def restore_view(self, context: bpy.types.Context) -> None:
        """Undo anything ``__init__`` changed for reading (e.g. the current frame)."""


def _status(context: bpy.types.Context, text: str | None) -> None:
    workspace = getattr(context, "workspace", None)
    if workspace is not None:
        try:
            workspace.status_text_set(text)
        except (AttributeError, TypeError):
            pass


class BakeOperator:
    """Mixin for bake operators. Subclasses implement ``make_job(context) -> BakeJob``.

    ``make_job`` raises ``core.SinewError`` (or returns None after ``self.report``) for bad
    input; the operator then reports the message and changes nothing.
    """

    _job: BakeJob | None = None
    _timer: Any = None
    _started = 0.0
    _last_print = -1.0

    # -- to override -------------------------------------------------------------------
    def make_job(self, context: bpy.types.Context) -> BakeJob | None:
        raise NotImplementedError

    # -- shared -------------------------------------------------------------------------
    def _record(self, context: bpy.types.Context, summary: str = "", error: str = "") -> None:
        ob = getattr(context, "active_object", None)
        LAST_RESULT.update(summary=summary, error=error, operator=getattr(self, "bl_idname", ""),
                           object=ob.name if ob is not None else "")

    def _create(self, context: bpy.types.Context) -> BakeJob | None:
        from .core import SinewError

        try:
            return self.make_job(context)
        except SinewError as exc:
            self._record(context, error=str(exc))
            self.report({"ERROR"}, str(exc))
            return None

    def _progress_line(self, job: BakeJob, force: bool = False) -> None:
        now = time.perf_counter()
        if force or now - self._last_print > 1.0:
            self._last_print = now
            pct = 100.0 * job.done / max(job.total, 1)
            print(f"Sinew: {job.label}: {job.done}/{job.total} ({pct:.0f}%)", flush=True)

    def _finish(self, context: bpy.types.Context, job: BakeJob) -> set[str]:
        from .core import SinewError

        job.restore_view(context)
        try:
            summary = job.commit(context)
        except SinewError as exc:
            self._record(context, error=str(exc))
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        elapsed = time.perf_counter() - self._started
        message = f"{summary} in {elapsed:.2f} s"
        self._record(context, summary=message)
        print(f"Sinew: {job.label}: {message}", flush=True)
        self.report({"INFO"}, message)
        return {"FINISHED"}

    def _fail(self, context: bpy.types.Context, job: BakeJob, exc: Exception) -> set[str]:
        self._record(context, error=str(exc))
        job.cancel()
        job.restore_view(context)
        self.report({"ERROR"}, str(exc))
        print(f"Sinew: {job.label}: failed: {exc}", flush=True)
        return {"CANCELLED"}

    def execute(self, context: bpy.types.Context) -> set[str]:
        from .core import SinewError

        self._started = time.perf_counter()
        job = self._create(context)
        if job is None:
            return {"CANCELLED"}
        try:
            while not job.step():
                self._progress_line(job)
        except SinewError as exc:
            return self._fail(context, job, exc)
        except BaseException:
            job.cancel()
            job.restore_view(context)
            raise
        self._progress_line(job, force=True)
        return self._finish(context, job)

    def invoke(self, context: bpy.types.Context, event: Any) -> set[str]:
        if bpy.app.background or context.window is None:
            return self.execute(context)
        self._started = time.perf_counter()
        job = self._create(context)
        if job is None:
            return {"CANCELLED"}
        self._job = job
        wm = context.window_manager
        self._timer = wm.event_timer_add(0.01, window=context.window)
        wm.modal_handler_add(self)  # type: ignore[arg-type]  # a mixin of bpy.types.Operator
        wm.progress_begin(0, max(job.total, 1))
        _status(context, f"{job.label}: starting (Esc to cancel)")
        return {"RUNNING_MODAL"}

    def _end_modal(self, context: bpy.types.Context) -> None:
        wm = context.window_manager
        if self._timer is not None:
            wm.event_timer_remove(self._timer)
            self._timer = None
        wm.progress_end()
        _status(context, None)

    def modal(self, context: bpy.types.Context, event: Any) -> set[str]:
        from .core import SinewError

        job = self._job
        if job is None:
            return {"CANCELLED"}
        if event.type == "ESC":
            self._end_modal(context)
            job.cancel()
            job.restore_view(context)
            self.report({"WARNING"}, f"{job.label}: cancelled, nothing was changed")
            self._job = None
            return {"CANCELLED"}
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        deadline = time.perf_counter() + _SLICE
        try:
            finished = False
            while time.perf_counter() < deadline and not finished:
                finished = job.step()
        except SinewError as exc:
            self._end_modal(context)
            self._job = None
            return self._fail(context, job, exc)
        except BaseException:
            self._end_modal(context)
            self._job = None
            job.cancel()
            job.restore_view(context)
            raise
        context.window_manager.progress_update(job.done)
        _status(context, f"{job.label}: {job.done}/{job.total} (Esc to cancel)")
        if not finished:
            return {"RUNNING_MODAL"}
        self._end_modal(context)
        self._job = None
        return self._finish(context, job)
