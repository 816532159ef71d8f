"""``DatasetConfig.format`` -> the parser module's ``parse_dataset`` (imported lazily).

Every parser module exposes::

    def parse_dataset(cfg: DatasetConfig, report: ReviewReport, workers: int = 1
                      ) -> list[InkRecord]

updating ``report.seen`` / ``report.kept`` and adding a row per rejected item, so that the
counts reconcile. Modules that also take ``options: ParseConfig`` (keyword) receive the
``parse`` params section.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable

from cashg.core.config.data import DatasetConfig, ParseConfig
from cashg.core.records import InkRecord
from preprocessing.review import ReviewReport

PARSER_MODULES: dict[str, str] = {
    "iam_ondb": "preprocessing.parsers.iam_ondb",
    "brush": "preprocessing.parsers.brush",
    "casia_pot": "preprocessing.parsers.casia",
    "casia_ptts": "preprocessing.parsers.casia",
    "casia_wptt": "preprocessing.parsers.casia",
    "deepwriting": "preprocessing.parsers.deepwriting",
}


def get_parser(fmt: str) -> Callable[..., list[InkRecord]]:
    """The ``parse_dataset`` function for a format; a clear error for unknown formats."""
    try:
        module_name = PARSER_MODULES[fmt]
    except KeyError:
        raise ValueError(
            f"unknown dataset format {fmt!r}; known: {sorted(PARSER_MODULES)}"
        ) from None
    module = importlib.import_module(module_name)
    return module.parse_dataset


def parse(
    cfg: DatasetConfig, report: ReviewReport, workers: int = 1,
    options: ParseConfig | None = None,
) -> list[InkRecord]:
    """Parse the dataset described by ``cfg`` with its format's parser."""
    fn = get_parser(cfg.format)
    if options is not None and "options" in inspect.signature(fn).parameters:
        return fn(cfg, report, workers=workers, options=options)
    return fn(cfg, report, workers=workers)
