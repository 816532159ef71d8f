"""Inputs of generation: a writer's style reference images and the check of a text's characters.

Style references (paper Sec. 3.1: the style encoder reads a few glyph images of the writer):
from a folder of PNGs (``cashg generate --style-images``) or from a subsets ``style.h5``
(``--writer``, and the generate stage). Both give float32 images with background 0 and ink 1,
as in the subsets, evenly spaced over the sorted list when there are more than asked for.
"""

from __future__ import annotations

from pathlib import Path


def _select(images, n: int):
    import numpy as np

    if len(images) <= n:
        return images
    return images[np.linspace(0, len(images) - 1, n).round().astype(int)]


def load_style_folder(folder: Path, size: int, n_refs: int):
    """(R, size, size) float32 in [0, 1], background 0, ink 1, from the PNGs of ``folder``."""
    import numpy as np
    from PIL import Image

    files = sorted(p for p in folder.glob("*") if p.suffix.lower() == ".png")
    if not files:
        raise ValueError(f"{folder}: no .png style images")
    out = []
    for f in files:
        try:
            with Image.open(f) as im:
                g = np.asarray(im.convert("L").resize((size, size), Image.BILINEAR), np.float32)
        except OSError as exc:
            raise ValueError(f"{f}: not a readable image ({exc})") from exc
        g = g / 255.0
        if g.mean() > 0.5:  # light background: make ink bright
            g = 1.0 - g
        out.append(g)
    return _select(np.stack(out), n_refs)


def natural_key(name: str) -> tuple:
    """Sort key that orders the digit runs of ``name`` as numbers (``brush:9`` < ``brush:10``)."""
    import re

    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part)
                 for part in re.split(r"(\d+)", name))


def list_names(names, limit: int = 30) -> str:
    """``a, b, c`` of ``names`` in natural order; past ``limit``, the first ``limit`` and
    ``... (N in all)``."""
    names = sorted(names, key=natural_key)
    if len(names) <= limit:
        return ", ".join(names)
    return f"{', '.join(names[:limit])}, ... ({len(names)} in all)"


def check_writer(path: Path, writer: str) -> None:
    """Raise ``ValueError`` unless ``writer`` has reference images in the subsets ``style.h5``
    ``path``; the message names the writers that have some (:func:`list_names`)."""
    from cashg.core.subsets.readers import StyleReader

    with StyleReader(path) as reader:
        by_writer = reader.indices_by_writer()
    if writer not in by_writer or not len(by_writer[writer]):
        known = [w for w, r in by_writer.items() if len(r)]
        raise ValueError(f"no writer {writer!r} in {path}; its writers: "
                         f"{list_names(known) or '(none)'}")


def load_style_h5(path: Path, writer: str, size: int, n_refs: int):
    """(R, size, size) float32 from a subsets ``style.h5`` (uint8, background 0, ink 255);
    an unknown ``writer``: ``ValueError`` (:func:`check_writer`)."""
    import numpy as np

    from cashg.core.subsets.readers import StyleReader

    check_writer(path, writer)
    with StyleReader(path) as reader:
        images = reader.writer_images(writer).astype(np.float32) / 255.0
    if images.shape[1:] != (size, size):
        raise ValueError(f"{path}: images are {images.shape[1:]}, the model needs {size}x{size}")
    return _select(images, n_refs)


def unknown_characters(texts: list[str], inventory: list[str] | None) -> list[str]:
    """Sorted characters of ``texts`` missing from ``inventory`` (none when no inventory)."""
    if inventory is None:
        return []
    known = set(inventory)
    return sorted({c for t in texts for c in t} - known)
