"""A few shapes per curriculum stage: what a replayed training step needs (``train.static_shapes``).

A CUDA graph replays the kernels it captured on tensors of the captured shapes; a step whose
sizes follow the data (windows, packed tokens, length buckets, scored points, boundaries, the
batch's distinct code points) would need a capture per step. A static-shape step pads every
data-dependent size up to a rung of :func:`rung` (1, 2, 3, 4, 6, 8, 12, 16, 24, ...: at most
1.5x the size, so at most 50 % padding per size), and a :class:`ShapeLadder` keeps, per stage
and size, the largest rung seen so far: sizes only grow, so a stage settles on one shape
after its first few batches (counted on the ``dsd`` subsets: docs/results-log.md, "Probes
retired from scripts/measure").

What a padded step computes for the padding never reaches a loss: the batch is padded with
invalid characters and points (:func:`cashg.model.batch.pad_batch`), the windows are run in
:data:`LENGTH_CLASSES`, each class padded with dummy windows whose predictions are dropped
(:meth:`cashg.model.cashg_model.CASHG.static_plan`), and the
losses read every point and boundary, those that are not scored going to a group of their own
that is dropped (:func:`cashg.training.packed.static_step_inputs`). The losses and gradients
equal the unpadded step's within float rounding (tests/test_static_shapes.py).
"""

from __future__ import annotations

import bisect

# window-length classes of a static-shape step: windows of at most 24 tokens, of 25-32, 33-48,
# 49-64, 65-96, 97-128 and longer ones each run by the decoder on their own, padded to the
# class's bound (the last to the longest window), so that a glyph window of 20 tokens is not
# padded to a sentence's longest of 250 (cashg.model.cashg_model.CASHG.static_plan). Bounds
# 1.33-1.5x apart: a window pads by at most a third (docs/results-log.md: the demo's padded
# stage-3 step 1.32-1.40x the eager one's time with (32, 64, 128), 1.21-1.28x with these, for
# 7 / 15 / 13 padded signatures in the dsd stages' first 100 batches instead of 5 / 10 / 9)
LENGTH_CLASSES = (24, 32, 48, 64, 96, 128)

RUNGS = tuple(sorted({2 ** i for i in range(40)} | {3 * 2 ** i for i in range(40)}))


def rung(n: int) -> int:
    """The smallest of 1, 2, 3, 4, 6, 8, 12, 16, 24, ... (2^k and 3 * 2^k) that is >= ``n``."""
    return RUNGS[bisect.bisect_left(RUNGS, max(n, 1))]


class ShapeLadder:
    """The padded size of each named size (e.g. ``"3/T"``: stage 3's points per character):
    the rung of the largest value seen so far under that name, so that a stage's step takes
    few distinct shapes (a new one only when the data first needs a larger rung)."""

    def __init__(self) -> None:
        self.sizes: dict[str, int] = {}

    def fit(self, name: str, n: int) -> int:
        """The padded size for a value ``n`` of size ``name`` (>= n; never smaller than the
        size returned before under the same name). 0 while every value so far was 0 (a
        length class no window of the stage has reached yet: not run at all)."""
        size = max(self.sizes.get(name, 0), rung(n) if n > 0 else 0)
        self.sizes[name] = size
        return size

    def stage_sizes(self, stage: int) -> tuple:
        """The sizes of ``stage`` so far (names ``"<stage>/..."``), sorted: a step padded
        under other stage sizes can never recur once they have grown (a replayed step frees
        the captures of superseded sizes, :mod:`cashg.training.graphed`)."""
        prefix = f"{stage}/"
        return tuple(sorted((k, v) for k, v in self.sizes.items() if k.startswith(prefix)))
