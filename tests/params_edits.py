"""Test helpers: edited copies of the repository's params.yaml (the error an edit must raise;
a tiny training)."""

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


def tiny_training_params(tmp_path: Path) -> Path:
    """params.yaml with a tiny model and a six-iteration schedule."""
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["model"].update({"canine_hidden": 32, "canine_layers": 1, "canine_heads": 2,
                            "canine_intermediate": 64, "canine_hash_buckets": 512,
                            "code_table_size": 256, "code_dim": 8, "d_model": 32,
                            "n_heads": 4, "ffn_dim": 64, "style_refs": 2,
                            "style_cnn_width": 8, "supcon_dim": 16,
                            "writer_decoder_layers": 1, "glyph_decoder_layers": 1,
                            "n_mixtures": 3})
    params["train"].update({"total_iters": 6, "stage2_start": 2, "stage3_start": 4,
                            "vdl_sentence_warmup_start": 4, "vdl_sentence_warmup_end": 5,
                            "lr_decay_start": 4, "lr_decay_end": 6, "eval_interval": 3,
                            "checkpoint_interval": 3, "batch_char": 3, "batch_bigram": 3,
                            "batch_sentence": 2, "sentence_accum": 1, "val_writers": 1,
                            "sample_lines": 0})
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path
