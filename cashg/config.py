"""Typed configs for the model-side sections of ``params.yaml`` (model, training, evaluation)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelConfig:
    """CASHG architecture (paper Sec. 3, appendix C). Owned by cashg/model; fields TBD."""


@dataclass(frozen=True)
class EvaluateConfig:
    """Evaluation protocol options (paper Sec. 4.1, appendix E). Owned by cashg/evaluation."""


CASHG_SECTIONS: dict[str, type | object] = {"model": ModelConfig, "evaluate": EvaluateConfig}
