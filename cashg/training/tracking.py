"""Experiment tracking with dvclive (offline) and rendered sample lines.

dvclive writes into ``<out>/dvclive``: ``metrics.json`` (latest values), ``plots/metrics/**.tsv``
(one file per metric, the curves DVC plots) and ``plots/images/samples/iter_<t>.png``. It never
contacts the network (Studio off, no analytics), does not create a DVC experiment
(``save_dvc_exp=False``) and does not rewrite the repository's ``dvc.yaml``
(``dvcyaml=False``): the plots are declared in ``dvc.yaml`` by hand.

Metric names: ``train/<stream>/{mdn,pen,vdl,seq,style}`` (interval means), ``train/{total,lr,
stage,grad_norm,samples_per_sec,nonfinite_skipped}``, ``val/<stream>/{mdn,pen,vdl,seq}``,
``val/total``. The step is the iteration (completed optimizer steps).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

OFFLINE_ENV = {"DVC_STUDIO_OFFLINE": "true", "DVC_NO_ANALYTICS": "1", "DVCLIVE_OPEN": "false"}


class Tracker:
    """Thin wrapper over :class:`dvclive.Live`; a no-op when ``folder`` is None."""

    def __init__(self, folder: Path | None, resume: bool):
        self.live = None
        if folder is None:
            return
        for k, v in OFFLINE_ENV.items():
            os.environ.setdefault(k, v)
        from dvclive import Live

        self.live = Live(str(folder), resume=resume, report=None, save_dvc_exp=False,
                         dvcyaml=False, monitor_system=False)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        if self.live is None:
            return
        self.live.step = step
        for k in sorted(metrics):
            v = float(metrics[k])
            if np.isfinite(v):
                self.live.log_metric(k, v, timestamp=False)
        self.live.make_summary()

    def log_params(self, params: dict) -> None:
        if self.live is not None:
            self.live.log_params(params)

    def log_image(self, name: str, path: Path) -> None:
        if self.live is not None:
            self.live.log_image(name, str(path))

    def close(self) -> None:
        if self.live is not None:
            self.live.end()
            self.live = None


def render_samples(model: torch.nn.Module, lines: list[tuple[str, np.ndarray, str]],
                   path: Path, seed: int) -> None:
    """Generate each ``(text, style refs (R, S, S) in [0, 1], writer)`` and render one PNG
    (one row per line), with :func:`cashg.sampling.generate_sentences` (fixed seed)."""
    from cashg.render import render_png
    from cashg.sampling import SamplingOptions, generate_sentences

    sentences = []
    for i, (text, refs, writer) in enumerate(lines):
        sentences += generate_sentences(model, [text], torch.from_numpy(refs),
                                        SamplingOptions(seed=seed + i), writer_id=writer,
                                        id_prefix=f"sample{i}")
    path.parent.mkdir(parents=True, exist_ok=True)
    render_png(sentences, path)
