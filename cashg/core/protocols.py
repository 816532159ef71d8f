"""The benchmark protocols: their names and their data-side facts (paper Sec. 4.1, Table 2).

One home for the protocol list. The typed params (``subsets.benchmarks.<name>.protocol``,
``evaluate.protocol``) take :data:`ProtocolName`; the benchmark checks
(:mod:`cashg.core.benchmarks`) and the subset builder read the data-side facts below; the
evaluation's per-protocol metric table (:mod:`cashg.evaluation.protocols`) is keyed by the same
names (a test keeps the two sets equal).

==============  ===========================================  ============================
protocol        source formats                               paper benchmark
==============  ===========================================  ============================
``dsd``         ``brush``                                    DSD on BRUSH
``deepwriting`` ``iam_ondb``, ``deepwriting``                DeepWriting (IAM-expanded)
``merged``      ``iam_ondb``, ``brush``, ``deepwriting``     the IAM + BRUSH ablation set
``olhwg``       ``casia_ptts``                               OLHWG on CASIA-OLHWDB 2.0-2.2
``sdt_glyph``   ``casia_pot``                                SDT glyphs, CASIA-OLHWDB 1.0-1.2
``none``        any                                          no protocol rule
==============  ===========================================  ============================

Two protocol rules shape the test split the subset builder writes:

- a *whole* test set (:data:`WHOLE_TEST_SET_PROTOCOLS`: ``dsd``, ``deepwriting``) is fixed by
  the protocol's split (BRUSH writers, DeepWriting's validation file): segmentation review must
  not shrink it. Flagged sentences stay in it, and a test sentence that preprocessing had to drop
  as unusable is an error naming it (``preprocessing.subsets.test_set``). The other protocols
  filter their test sets like any split (OLHWG's strict validation discards sentences by
  definition, paper app. B.4).
- an *unsimplified* test ground truth (:data:`UNSIMPLIFIED_TEST_GT_PROTOCOLS`: ``dsd``) keeps
  every resampled point: the paper disables RDP in the DSD evaluation (Sec. 4.1, "Benchmark-
  matched sentence-level comparisons").
"""

from __future__ import annotations

from typing import Literal, get_args

ProtocolName = Literal["dsd", "deepwriting", "olhwg", "sdt_glyph", "merged", "none"]
PROTOCOL_NAMES: tuple[str, ...] = get_args(ProtocolName)

PROTOCOL_FORMATS: dict[str, frozenset[str] | None] = {
    "dsd": frozenset({"brush"}),
    "deepwriting": frozenset({"iam_ondb", "deepwriting"}),
    "merged": frozenset({"iam_ondb", "brush", "deepwriting"}),
    "olhwg": frozenset({"casia_ptts"}),
    "sdt_glyph": frozenset({"casia_pot"}),
    "none": None,  # any format
}
WHOLE_TEST_SET_PROTOCOLS = frozenset({"dsd", "deepwriting"})
UNSIMPLIFIED_TEST_GT_PROTOCOLS = frozenset({"dsd"})
