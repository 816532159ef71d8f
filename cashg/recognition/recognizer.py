"""A trained recognizer: network, alphabet and feature statistics, saved and loaded as one file.

``recognizer.pt`` is a plain dictionary (``format = "cashg-recognizer"``, ``version``), loaded
with ``torch.load(..., weights_only=True)`` (tensors, numbers, strings and containers only; no
code runs on load). It holds everything needed to transcribe new ink: the model and feature
settings, the alphabet, the training-set feature statistics and the weights, plus metadata
(benchmark, iterations). Changing the layout bumps :data:`VERSION`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cashg.core.config.recognizer import RecognizerFeatureConfig, RecognizerModelConfig
from cashg.core.ink import InkSentence
from cashg.core.params import ParamsError, build
from cashg.recognition.ctc import Alphabet, greedy_decode
from cashg.recognition.features import (
    NormalisedLine,
    normalise_line,
    point_features,
    standardise,
)
from cashg.recognition.model import RecognizerNet

__all__ = ["FORMAT", "VERSION", "Recognizer", "RecognizerCheckpointError", "pad_batch",
           "read_state"]

_PAD_TO = 64
FORMAT = "cashg-recognizer"
VERSION = 1


class RecognizerCheckpointError(ValueError):
    """A recognizer file that cannot be loaded (the message names the file)."""


def pad_batch(features: Sequence[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T, 4) zero-padded float tensor and (B,) lengths of per-line (N, 4) features."""
    lengths = torch.tensor([len(f) for f in features], dtype=torch.long)
    frames = -(-max(int(lengths.max()), 1) // _PAD_TO) * _PAD_TO
    out = torch.zeros(len(features), frames, features[0].shape[1])
    for i, f in enumerate(features):
        out[i, : len(f)] = torch.from_numpy(f)
    return out, lengths


def read_state(path: Path, fmt: str, version: int, error: type[Exception],
               what: str) -> dict:
    """The plain dictionary of a ``torch.save``d file of ``format`` ``fmt`` and ``version``,
    loaded with ``weights_only=True`` (no code runs on load); a missing, unreadable or
    other file raises ``error`` naming ``path`` (``what``: the kind of file, for the
    message). The recognizer's and the glyph reader's files."""
    if not path.is_file():
        raise error(f"{path}: {what} file not found")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is reported the same way
        raise error(f"{path}: not a loadable {what} file ({exc})") from exc
    if not isinstance(state, dict) or state.get("format") != fmt:
        raise error(f"{path}: not a {fmt} file")
    if state.get("version") != version:
        raise error(f"{path}: version {state.get('version')!r} is not supported ({version})")
    return state


class Recognizer:
    """Network + alphabet + feature settings; :meth:`transcribe` turns ink into text."""

    def __init__(self, net: RecognizerNet, alphabet: Alphabet, model_cfg: RecognizerModelConfig,
                 feature_cfg: RecognizerFeatureConfig, mean: np.ndarray, std: np.ndarray,
                 meta: Mapping[str, Any] | None = None):
        self.net, self.alphabet = net, alphabet
        self.model_cfg, self.feature_cfg = model_cfg, feature_cfg
        self.mean = np.asarray(mean, np.float32)
        self.std = np.asarray(std, np.float32)
        self.meta = dict(meta or {})

    def features(self, line: NormalisedLine) -> np.ndarray:
        """(N, 4) standardised network input of a normalised line."""
        return standardise(point_features(line.xy, line.lift), self.mean, self.std,
                           self.feature_cfg.clip)

    def transcribe_lines(self, lines: Sequence[NormalisedLine],
                         batch_size: int = 32) -> list[str]:
        """Greedy CTC transcription of normalised lines (batched by length, eval mode)."""
        out: list[str] = [""] * len(lines)
        order = sorted((i for i in range(len(lines)) if len(lines[i])),
                       key=lambda i: len(lines[i]))
        was_training = self.net.training
        self.net.eval()
        try:
            with torch.no_grad():
                for start in range(0, len(order), batch_size):
                    idx = order[start:start + batch_size]
                    x, n = pad_batch([self.features(lines[i]) for i in idx])
                    log_probs, frames = self.net(x, n)
                    for i, ids in zip(idx, greedy_decode(log_probs.numpy(), frames.tolist())):
                        out[i] = self.alphabet.decode(ids)
        finally:
            self.net.train(was_training)
        return out

    def transcribe(self, sentences: Sequence[InkSentence], batch_size: int = 32) -> list[str]:
        """Greedy CTC transcription of cashg-ink sentences (ground truth or generated alike)."""
        cfg = self.feature_cfg
        lines = [normalise_line(s, cfg.baseline_window, cfg.point_spacing) for s in sentences]
        return self.transcribe_lines(lines, batch_size)

    # ------------------------------------------------------------------ file
    def save(self, path: str | Path) -> Path:
        """Write the recognizer file atomically (``path`` + ``.tmp``, then rename)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {
            "format": FORMAT, "version": VERSION,
            "alphabet": self.alphabet.chars,
            "model": dataclasses.asdict(self.model_cfg),
            "features": dataclasses.asdict(self.feature_cfg),
            "feature_mean": [float(v) for v in self.mean],
            "feature_std": [float(v) for v in self.std],
            "meta": self.meta,
            "state_dict": {k: v.detach().cpu().clone() for k, v in self.net.state_dict().items()},
        }
        tmp = path.with_name(path.name + ".tmp")
        torch.save(state, tmp)
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> Recognizer:
        """Read a recognizer file (restricted loading; errors name the file)."""
        path = Path(path)
        state = read_state(path, FORMAT, VERSION, RecognizerCheckpointError, "recognizer")
        try:
            model_cfg = build(RecognizerModelConfig, state["model"], f"{path}: model")
            feature_cfg = build(RecognizerFeatureConfig, state["features"], f"{path}: features")
            alphabet = Alphabet(state["alphabet"])
            net = RecognizerNet(model_cfg, alphabet.n_classes)
            net.load_state_dict(state["state_dict"])
        except (KeyError, ParamsError, RuntimeError) as exc:
            raise RecognizerCheckpointError(f"{path}: inconsistent recognizer file ({exc})"
                                            ) from exc
        net.eval()
        return cls(net, alphabet, model_cfg, feature_cfg, np.array(state["feature_mean"]),
                   np.array(state["feature_std"]), state.get("meta"))
