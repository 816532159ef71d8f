"""A tiny run for the studio tests: a random TINY checkpoint, a two-writer style.h5, a report,
metrics and pictures in the pipeline's results layout; and a real uvicorn server in a thread."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import h5py
import numpy as np
from PIL import Image

INVENTORY = "abcdehlnorstw "
WRITERS = ("w:0", "w:1")


def _style_h5(path: Path, size: int = 64, per_writer: int = 3) -> None:
    from cashg.core.subsets.schema import FORMAT, SCHEMA_VERSION

    path.parent.mkdir(parents=True, exist_ok=True)
    images = np.zeros((len(WRITERS) * per_writer, size, size), np.uint8)
    for i in range(len(images)):  # a bar per glyph, at a different place each
        images[i, 10:54, 12 + 5 * i:18 + 5 * i] = 255
    with h5py.File(path, "w") as f:
        f.attrs.update({"format": FORMAT, "schema_version": SCHEMA_VERSION, "kind": "style",
                        "n_samples": len(images)})
        f.create_dataset("writers", data=np.array(WRITERS, dtype=object),
                         dtype=h5py.string_dtype("utf-8"))
        f.create_dataset("writer_offsets",
                         data=np.arange(0, len(images) + 1, per_writer, dtype=np.int64))
        f.create_dataset("images", data=images)
        f.create_dataset("char", data=np.array(list("abc" * len(WRITERS)), dtype=object),
                         dtype=h5py.string_dtype("utf-8"))
        f.create_dataset("glyph_index", data=np.arange(len(images)))


def make_tiny_run(root: Path) -> Path:
    """``root/results`` with experiment ``tiny`` (benchmark ``tiny``, test split)."""
    import torch

    from cashg.model import CASHG
    from cashg.model.checkpoint import save_model_checkpoint
    from cashg.model.presets import TINY

    results = root / "results"
    torch.manual_seed(0)
    model = CASHG(TINY)
    with torch.no_grad():  # characters end after a few points: short, quick lines
        model.head.proj.bias[:4] = torch.tensor([1.0, 0.0, -0.5, 0.5])
    save_model_checkpoint(results / "train" / "tiny" / "model.pt", model, TINY,
                          {"char_inventory": list(INVENTORY)})
    _style_h5(results / "subsets" / "tiny" / "test" / "style.h5")
    from cashg.core.config.recognizer import GlyphReaderConfig
    from cashg.recognition.glyphs import GlyphReader, GlyphReaderNet

    cfg = GlyphReaderConfig(width=4)  # a random glyph reader: "check each letter" works
    letters = INVENTORY.replace(" ", "")
    (results / "recognizer" / "tiny").mkdir(parents=True)
    GlyphReader(GlyphReaderNet(len(letters), cfg.image_size, cfg.width), letters, cfg).save(
        results / "recognizer" / "tiny" / "glyph_reader.pt")
    pic = Image.fromarray(np.full((20, 60), 200, np.uint8))
    for sub in ("report/images/generated_tiny.png", "generate/tiny/lines.png",
                "new_text/tiny/lines.png"):
        (results / sub).parent.mkdir(parents=True, exist_ok=True)
        pic.save(results / sub)
    (results / "report" / "report.md").write_text(
        "# Tiny report\n\n| a | b |\n|:--|--:|\n| x | 1 |\n\n![tiny](images/generated_tiny.png)\n"
        "\n<script>alert(1)</script>\n", encoding="utf-8")
    (results / "evaluate" / "tiny").mkdir(parents=True)
    (results / "evaluate" / "tiny" / "metrics.json").write_text(json.dumps(
        {"CER": 0.5, "WER": 0.9, "ERR_lower": 0.4, "ERR_lower_gt": 0.1, "ERR_upper": None}))
    (results / "decoding_curve" / "tiny").mkdir(parents=True)
    (results / "decoding_curve" / "tiny" / "curve.json").write_text(json.dumps({"rows": [
        {"temperature": 0.5, "CER": 0.15, "WER": 0.55, "STYLE_top1": 0.39, "STYLE_top5": 0.9},
        {"temperature": 1.0, "CER": 0.24, "WER": 0.8, "STYLE_top1": 0.41, "STYLE_top5": 0.9}]}))
    return results


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """uvicorn serving ``app`` on 127.0.0.1 (a free port) in a thread; ``url``; ``stop()``."""

    def __init__(self, app):
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the studio server did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
