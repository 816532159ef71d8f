"""``params.yaml`` read into typed, frozen configuration objects.

One file holds the whole experiment configuration, one section per stage. Every section is a
frozen dataclass built by :func:`cashg.core.typed.build` (types checked, unknown keys refused).
The section dataclasses live in :mod:`cashg.core.config.data`, :mod:`cashg.core.config.model`
and :mod:`cashg.core.experiments`; :func:`load_params` validates every section and the links
between them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cashg.core.config.baselines import BASELINE_SECTIONS, check_baselines
from cashg.core.config.data import PREPROCESSING_SECTIONS
from cashg.core.config.evaluate import EvaluateConfig
from cashg.core.config.generate import GenerateConfig
from cashg.core.config.model import ModelConfig
from cashg.core.config.recognizer import RecognizerConfig
from cashg.core.config.train import TrainConfig
from cashg.core.experiments import EXPERIMENT_SECTIONS, check_params
from cashg.core.typed import ParamsError, build, read_yaml

__all__ = ["DEFAULT_PARAMS", "ParamsError", "build", "load_params", "load_section",
           "params_from_data", "read_yaml"]

DEFAULT_PARAMS = Path("params.yaml")
# the method's sections, one config module each (cashg/core/config/)
CASHG_SECTIONS: dict[str, type | object] = {"model": ModelConfig, "evaluate": EvaluateConfig,
                                           "train": TrainConfig, "generate": GenerateConfig,
                                           "recognizer": RecognizerConfig}
SECTIONS: dict[str, type | object] = {**PREPROCESSING_SECTIONS, **CASHG_SECTIONS,
                                      **EXPERIMENT_SECTIONS, **BASELINE_SECTIONS}


def load_params(path: str | Path = DEFAULT_PARAMS) -> dict[str, Any]:
    """Validate the whole params file and return ``{section name: typed config}``.

    Every section is checked, so a misspelt top-level section fails for every stage; so are
    the links between sections (a benchmark's datasets and protocol, the experiments' benchmarks, the ablation's cells:
    :func:`cashg.core.experiments.check_params`).
    """
    return params_from_data(read_yaml(path), str(path))


def params_from_data(data: dict[str, Any], path: str) -> dict[str, Any]:
    """:func:`load_params` of an already read params file (``path`` names it in errors)."""
    sections = SECTIONS
    unknown = sorted(set(data) - set(sections))
    if unknown:
        raise ParamsError(
            f"{path}: unknown section {', '.join(repr(u) for u in unknown)}"
            f" (known sections: {', '.join(sorted(sections))})"
        )
    # a section left out (or empty) takes its defaults; the experiments map: none
    params = {name: build(cls, {} if data.get(name) is None else data[name], f"{path}: {name}")
              for name, cls in sections.items()}
    check_params(params, str(path), set(data))  # raises ParamsError (BenchmarkError)
    if {"baselines", "collage"} & set(data):
        check_baselines(params, str(path))
    return params


def load_section(name: str, path: str | Path = DEFAULT_PARAMS) -> Any:
    """The typed config of one section, after validating the whole file."""
    return load_params(path)[name]
