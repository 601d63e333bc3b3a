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

Every run of a bake operator owns a :class:`BakeReport` (what happened: finished, failed or
cancelled, the one-line summary or error, warnings). When the run ends the report is stored
on the object it concerns, ``object.sinew_report``, where the panels and the command line read
it; there is no module-level record shared between runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import bpy
from bpy.props import PointerProperty, StringProperty

# Time spent computing per timer tick in modal mode (seconds): keeps the UI responsive.
_SLICE = 0.05


@dataclass
class BakeReport:
    """What one run of a bake operator did.

    Attributes
    ----------
    operator : str
        The operator's ``bl_idname``, e.g. ``'sinew.bake_ik'``.
    state : str
        ``'RUNNING'``, ``'FINISHED'``, ``'FAILED'`` or ``'CANCELLED'``.
    summary : str
        The one-line result of a finished bake.
    error : str
        Why a failed bake failed.
    warnings : list of str
    """

    operator: str
    state: str = "RUNNING"
    summary: str = ""
    error: str = ""
    warnings: list[str] = field(default_factory=list)

    def store(self, obj: bpy.types.Object | None) -> None:
        """Write this report to ``obj.sinew_report`` (nothing without an object)."""
        if obj is None or not hasattr(obj, "sinew_report"):
            return
        r = obj.sinew_report
        r.operator, r.state, r.summary, r.error = self.operator, self.state, self.summary, self.error
        r.warnings = "\n".join(self.warnings)


class SINEW_PG_bake_report(bpy.types.PropertyGroup):
    """The report of the last Sinew bake run on this object (written by the bake operators)."""

    operator: StringProperty(name="Operator", description="The bake operator that ran last")  # type: ignore[valid-type]
    state: StringProperty(  # type: ignore[valid-type]
        name="State", description="RUNNING, FINISHED, FAILED or CANCELLED")
    summary: StringProperty(name="Summary", description="One-line result of the last bake")  # type: ignore[valid-type]
    error: StringProperty(name="Error", description="Why the last bake failed")  # type: ignore[valid-type]
    warnings: StringProperty(name="Warnings", description="Warnings of the last bake, one per line")  # type: ignore[valid-type]


def read_report(obj: bpy.types.Object | None) -> dict[str, str]:
    """The last bake report stored on ``obj`` as a plain dict (empty strings when none)."""
    keys = ("operator", "state", "summary", "error", "warnings")
    if obj is None or not hasattr(obj, "sinew_report"):
        return dict.fromkeys(keys, "")
    return {k: str(getattr(obj.sinew_report, k)) for k in keys}


def last_error_for(operator: str, object_name: str) -> str:
    """The error of the last bake on the object ``object_name`` if it was an ``operator`` bake that failed."""
    obj = bpy.data.objects.get(object_name)
    report = read_report(obj)
    return report["error"] if report["operator"] == operator and report["state"] == "FAILED" else ""


def register() -> None:
    bpy.utils.register_class(SINEW_PG_bake_report)
    bpy.types.Object.sinew_report = PointerProperty(type=SINEW_PG_bake_report)


def unregister() -> None:
    if hasattr(bpy.types.Object, "sinew_report"):
        del bpy.types.Object.sinew_report
    if getattr(SINEW_PG_bake_report, "is_registered", False):
        bpy.utils.unregister_class(SINEW_PG_bake_report)


class BakeJob:
    """A bake split into steps. Subclasses override the four methods below.

    Attributes
    ----------
    done, total : int
        Progress in the job's own units (usually frames).
    label : str
        Shown in progress lines, e.g. ``"IK Armature"``.
    warnings : list of str
        Things the user should know about a finished bake (reported as warnings).
    object_name : str
        The object the bake writes to; its ``sinew_report`` receives the run's report.
    """

    label = "Sinew bake"

    def __init__(self) -> None:
        self.done = 0
        self.total = 1
        self.warnings: list[str] = []
        self.object_name = ""

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
    _run_report: BakeReport | None = None
    _report_object = ""
    _timer: Any = None
    _started = 0.0
    _last_print = -1.0

    # -- to override -------------------------------------------------------------------
    def make_job(self, context: bpy.types.Context) -> BakeJob | None:
        raise NotImplementedError

    # -- shared -------------------------------------------------------------------------
    def _operator_id(self) -> str:
        """``'sinew.bake_ik'`` (a registered operator's ``bl_idname`` reads ``'SINEW_OT_bake_ik'``)."""
        name = getattr(self, "bl_idname", "")
        if "_OT_" in name:
            prefix, rest = name.split("_OT_", 1)
            name = f"{prefix.lower()}.{rest}"
        return name

    def _record(self, state: str, summary: str = "", error: str = "", warnings: list[str] | None = None) -> None:
        """Complete this run's report and store it on the object the bake concerns."""
        report = self._run_report or BakeReport(self._operator_id())
        report.state, report.summary, report.error = state, summary, error
        report.warnings = list(warnings or [])
        self._run_report = report
        report.store(bpy.data.objects.get(self._report_object))

    def _create(self, context: bpy.types.Context) -> BakeJob | None:
        from .core import SinewError

        ob = getattr(context, "active_object", None)
        self._report_object = ob.name if ob is not None else ""
        self._run_report = BakeReport(self._operator_id())
        try:
            job = self.make_job(context)
        except SinewError as exc:
            self._record("FAILED", error=str(exc))
            self.report({"ERROR"}, str(exc))
            return None
        if job is not None and job.object_name:
            self._report_object = job.object_name
        return job

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
            self._record("FAILED", error=str(exc))
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        elapsed = time.perf_counter() - self._started
        message = f"{summary} in {elapsed:.2f} s"
        self._record("FINISHED", summary=message, warnings=job.warnings)
        print(f"Sinew: {job.label}: {message}", flush=True)
        self.report({"INFO"}, message)
        for text in job.warnings:
            self.report({"WARNING"}, text)
            print(f"Sinew: {job.label}: warning: {text}", flush=True)
        return {"FINISHED"}

    def _fail(self, context: bpy.types.Context, job: BakeJob, exc: Exception) -> set[str]:
        self._record("FAILED", error=str(exc))
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
        except BaseException as exc:
            job.cancel()
            job.restore_view(context)
            self._record("FAILED", error=f"internal error: {exc!r}")
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
            self._record("CANCELLED", error="cancelled, nothing was changed")
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
        except BaseException as exc:
            self._end_modal(context)
            self._job = None
            job.cancel()
            job.restore_view(context)
            self._record("FAILED", error=f"internal error: {exc!r}")
            raise
        context.window_manager.progress_update(job.done)
        _status(context, f"{job.label}: {job.done}/{job.total} (Esc to cancel)")
        if not finished:
            return {"RUNNING_MODAL"}
        self._end_modal(context)
        self._job = None
        return self._finish(context, job)
