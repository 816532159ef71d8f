"""Self-describing model checkpoints (``torch.load(..., weights_only=True)`` compatible).

Contents (plain dicts, lists, str, numbers and tensors only; no pickled objects):
``format = "cashg-model"``, ``version``, ``model_config`` (the ModelConfig as a dict),
``backbone_config`` (the text backbone's ``CanineConfig.to_dict()``, so the architecture is
rebuilt without a download), ``state_dict`` (all weights, the frozen backbone included), and
``extra`` (a dict for the training code: ``char_inventory`` (list of characters seen in
training), optimizer/scheduler/RNG states, iteration, params ...). Training extends ``extra``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch

from cashg.core.config.model import ModelConfig
from cashg.core.params import build
from cashg.model.cashg_model import CASHG

FORMAT = "cashg-model"
VERSION = 2  # 2: the decoder has the context branch (model.context_layers)


class CheckpointError(ValueError):
    """A file that is not a loadable CASHG checkpoint."""


def save_model_checkpoint(path: str | Path, model: CASHG, model_config: ModelConfig,
                          extra: dict | None = None) -> None:
    """Write ``model`` with its configuration (and ``extra``) to ``path`` (folders created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    backbone_config = json.loads(model.text.backbone.config.to_json_string(use_diff=False))
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "model_config": {k: list(v) if isinstance(v, tuple) else v
                         for k, v in dataclasses.asdict(model_config).items()},
        "backbone_config": backbone_config,
        # each tensor its own storage (training keeps parameters as views of one flat tensor)
        "state_dict": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "extra": dict(extra or {}),
    }
    torch.save(payload, path)


def read_payload(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    """The raw checkpoint dictionary, loaded with ``weights_only`` (no arbitrary pickles)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint not found")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:
        raise CheckpointError(f"{path}: not a loadable checkpoint ({exc})") from exc
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a {FORMAT} checkpoint")
    return payload


# options measured and not kept (docs/results-log.md), gone from ModelConfig: a checkpoint
# written before their removal stores them; off, they changed nothing and are dropped
REMOVED_MODEL_KEYS = ("jump_head", "gap_head", "writer_gap", "lift_from_box", "points_left")


def _model_config(payload: dict, path: Path) -> dict:
    """The stored model config; a checkpoint written before ``style_refs`` was a model key
    gets the number its training used (``extra.params.train.style_refs``) when recorded. A
    key of :data:`REMOVED_MODEL_KEYS` is dropped where it is off and refused where it is on
    (the model it describes cannot be built any more)."""
    stored = dict(payload["model_config"])
    for key in REMOVED_MODEL_KEYS:
        if stored.pop(key, False):
            raise CheckpointError(f"{path}: trained with model.{key}, an option this version "
                                  "no longer has (docs/results-log.md)")
    if "style_refs" not in stored:
        train = (payload.get("extra", {}).get("params") or {}).get("train") or {}
        if isinstance(train.get("style_refs"), int):
            stored["style_refs"] = train["style_refs"]
    return stored


def load_model(path: str | Path, map_location: str | torch.device = "cpu"):
    """``(model, config, extra)`` from a checkpoint; the model is in eval mode."""
    path = Path(path)
    payload = read_payload(path, map_location)
    if payload.get("version") != VERSION:
        raise CheckpointError(f"{path}: checkpoint version {payload.get('version')} != {VERSION}")
    cfg = build(ModelConfig, _model_config(payload, path), f"{path}: model_config")
    model = CASHG(cfg, backbone_config=payload["backbone_config"])
    missing, unexpected = model.load_state_dict(payload["state_dict"], strict=False)
    if missing or unexpected:
        raise CheckpointError(f"{path}: weights do not match the model (missing {missing[:5]}, "
                              f"unexpected {unexpected[:5]})")
    model.to(map_location).eval()
    return model, cfg, payload.get("extra", {})
