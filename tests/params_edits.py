"""Test helper: the error that loading an edited copy of the repository's params.yaml raises."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from cashg.core.params import ParamsError, load_params

REPO = Path(__file__).resolve().parents[1]


def params_error(tmp_path: Path, edit: Callable[[dict], object]) -> tuple[Path, str]:
    """``edit`` the parsed params.yaml, write it to ``tmp_path`` and load it: the written
    path and the text of the :class:`ParamsError` it must raise."""
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    edit(params)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    with pytest.raises(ParamsError) as err:
        load_params(path)
    return path, str(err.value)
