"""Write an :class:`EvaluationResult` to a folder (the ``cashg evaluate`` outputs).

``metrics.json`` (exactly F1_cursive, CRE, KGS, SSS, DTW_raw, DTW_norm, DTW_std, then the
recognition keys CER, WER, CER_gt, WER_gt, ERR_<class>, ERR_<class>_gt of
:data:`cashg.evaluation.protocols.RECOGNITION_KEYS`; null when undefined or, for the
recognition keys, without a recognizer),
``details.json`` (protocol, options, counts), ``sentences.csv`` (with per-sentence CER when
a recognizer scored them), ``units.csv``
(DTW per sentence or glyph), ``writers.csv``, ``missing.csv``, ``excluded.csv``, ``table.md``
(paper Table 2 layout), ``samples.png`` (GT vs prediction) and ``distributions.png``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

from cashg.core.ink import InkSentence
from cashg.evaluation.evaluate import EvaluationResult
from cashg.evaluation.plots import plot_distributions, plot_pairs
from cashg.evaluation.tables import table2_markdown

__all__ = ["write_outputs"]


def _clean(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value


def write_outputs(
    result: EvaluationResult,
    out_dir: str | Path,
    gt: Mapping[str, InkSentence] | None = None,
    pred: Mapping[str, InkSentence] | None = None,
    method: str = "prediction",
    benchmark: str | None = None,
    plot_sentences: int = 4,
) -> Path:
    """Write every output file into ``out_dir`` (created); returns the metrics.json path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    metrics_path = out / "metrics.json"
    metrics_path.write_text(json.dumps(_clean(dict(result.metrics)), indent=2) + "\n")
    (out / "details.json").write_text(
        json.dumps(_clean(result.details), indent=2, sort_keys=True, default=str) + "\n"
    )
    result.sentences.to_csv(out / "sentences.csv", index=False)
    result.units.to_csv(out / "units.csv", index=False)
    result.writers.to_csv(out / "writers.csv", index=False)
    result.missing.to_csv(out / "missing.csv", index=False)
    result.excluded.to_csv(out / "excluded.csv", index=False)
    bench = benchmark or result.details.get("protocol", "")
    (out / "table.md").write_text(table2_markdown([(bench, method, result.metrics)]))
    if gt is not None and pred is not None:
        ids = [s for s in result.sentences.get("sentence_id", [])][: max(0, plot_sentences)]
        plot_pairs([(gt[i], pred[i]) for i in ids], out / "samples.png")
    plot_distributions(result.units, result.writers, result.sentences, out / "distributions.png")
    return metrics_path
