"""Typed configs for the model-side sections of ``params.yaml`` (model, training, evaluation)."""

from __future__ import annotations

CASHG_SECTIONS: dict[str, type | object] = {}
