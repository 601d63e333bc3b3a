"""Exceptions raised by ``core``.

Every error that bad *input* can cause is a :class:`SinewError`, which subclasses
``ValueError`` so callers that only know the standard library still catch it. The
Blender add-on turns these into one-line reports; anything else is a bug.
"""

from __future__ import annotations


class SinewError(ValueError):
    """Base class: invalid input or a simulation that cannot go on."""


class ChainError(SinewError):
    """A bone chain that cannot be solved (zero-length bones, bad shapes, ...)."""


class ExpressionError(SinewError):
    """A target expression that does not parse or evaluate.

    Attributes
    ----------
    position : int
        0-based character offset of the fault in the expression text.
    """

    def __init__(self, message: str, position: int = 0, text: str = "") -> None:
        self.position = int(position)
        self.text = text
        self.reason = message
        super().__init__(f"{message} (at character {self.position + 1})")


class TopologyError(SinewError):
    """A mesh that cannot be turned into a spring model."""


class DivergenceError(SinewError):
    """A simulation that produced non-finite values or runaway energy.

    Attributes
    ----------
    frame : int
        The frame (in the caller's numbering) at which divergence was detected.
    remedy : str
        What the user can change to avoid it.
    """

    def __init__(self, frame: int, detail: str, remedy: str) -> None:
        self.frame = int(frame)
        self.detail = detail
        self.remedy = remedy
        super().__init__(f"simulation diverged at frame {self.frame}: {detail}. {remedy}")


class StabilityError(DivergenceError):
    """A step longer than the integrator's stability limit (raised before the first step
    it would take: the simulation would diverge there).

    Attributes as :class:`DivergenceError`; the message says how many substeps are needed.
    """

    def __init__(self, frame: int, detail: str, remedy: str) -> None:
        self.frame = int(frame)
        self.detail = detail
        self.remedy = remedy
        ValueError.__init__(self, f"{detail}: {remedy}")


class BakeCancelled(SinewError):
    """Raised when a progress callback asks a bake to stop."""
