"""Typed configs of the ``evaluate`` section of ``params.yaml`` (the evaluate stage, its perturbed ground-truth check)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cashg.core.protocols import ProtocolName


@dataclass(frozen=True)
class PerturbConfig:
    """Deterministic perturbation of the ground truth used by the evaluate stage's sanity run.

    ``jitter``: std of the Gaussian noise added to every point, in units of the sentence
    height; ``flip_fraction``: fraction of adjacent-character boundary labels toggled between
    CURSIVE_EOC and EOC; ``spacing``: each word is shifted by a uniform offset in
    [-spacing, spacing] heights (cumulative along the line), changing word gaps.
    """

    seed: int = 0
    jitter: float = 0.01
    flip_fraction: float = 0.2
    spacing: float = 0.1


@dataclass(frozen=True)
class EvaluateConfig:
    """Evaluation protocol options (paper Sec. 4.1, appendix E). Owned by cashg/evaluation.

    ``protocol``: a :data:`cashg.core.protocols.ProtocolName` (its metrics:
    ``cashg.evaluation.protocols``). ``dtw_variant``: ``protocol`` (the protocol's own DTW:
    exact, the paper's metric, except SDT's for ``sdt_glyph``) or a fixed one of exact and the
    peers' sdt / olhwg definitions. ``infer_cursive``: derive the prediction's CURSIVE_EOC labels with
    the distance heuristic (threshold ``tau_conn``) for methods that do not predict them.
    """

    protocol: ProtocolName = "merged"
    dtw_variant: Literal["protocol", "exact", "sdt", "olhwg"] = "protocol"
    infer_cursive: bool = False
    eps: float = 1e-6  # appendix E
    rho: float = 0.5  # KGS/SSS overlap penalty
    tau_conn: float = 0.005  # cursive heuristic threshold, normalised units
    seg_error_threshold: int = 3  # DeepWriting: exclude sentences with >= 3 bad characters
    sdt_radius: int = 1  # FastDTW radius of the SDT-style variant
    olhwg_rdp_epsilon: float = 0.02  # RDP epsilon of the OLHWG-style variant
    olhwg_radius: int = 1  # FastDTW radius of the OLHWG-style variant
    plot_sentences: int = 4  # sentences in the GT-vs-prediction grid
    perturb: PerturbConfig = PerturbConfig()
