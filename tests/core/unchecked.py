"""The explicit integrators without the simulator's stability check, for tests of what a
step does (pins, forces, degenerate meshes) rather than of how long it may be."""

from core.springs import INTEGRATORS


def unchecked(name: str):
    """An instance of ``INTEGRATORS[name]`` whose ``stable_step`` is unbounded, so the
    :class:`~core.springs.Simulator` takes exactly the substeps it is given (EXPLICIT on
    cloth would otherwise be refused: core/springs/explicit.py)."""

    class Unchecked(INTEGRATORS[name]):
        def stable_step(self, model):
            return float("inf")

    return Unchecked()
