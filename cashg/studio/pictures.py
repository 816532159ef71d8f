"""Pictures and pages the studio serves: reference-image strips (PNG) and the run's report
rendered to HTML."""

from __future__ import annotations

import io
import re

import numpy as np


def strip_png(images: np.ndarray, scale: int = 1, gap: int = 2) -> bytes:
    """A PNG of ``images`` (K, S, S) (uint8 ink 255, or float ink 1.0) side by side, dark ink on
    white, as the user expects to see handwriting."""
    from PIL import Image

    imgs = np.asarray(images)
    if imgs.dtype != np.uint8:
        imgs = np.clip(np.round(imgs * 255.0), 0, 255).astype(np.uint8)
    k, s = (imgs.shape[0], imgs.shape[1]) if imgs.ndim == 3 and len(imgs) else (0, 8)
    out = np.full((s, max(1, k * (s + gap) - gap)), 255, np.uint8)
    for i in range(k):
        out[:, i * (s + gap):i * (s + gap) + s] = 255 - imgs[i]
    pic = Image.fromarray(out, "L")
    if scale != 1:
        pic = pic.resize((pic.width * scale, pic.height * scale), Image.NEAREST)
    buf = io.BytesIO()
    pic.save(buf, "PNG")
    return buf.getvalue()


def report_html(markdown_text: str, image_prefix: str = "/report/images/") -> str:
    """The report's markdown as HTML (tables included), its ``images/`` links pointed at
    ``image_prefix``. Raw HTML in the markdown is escaped (the report is data, not markup)."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    html = md.render(markdown_text)
    return re.sub(r'src="images/([^"/]+)"', lambda m: f'src="{image_prefix}{m.group(1)}"', html)
