"""``cashg generate --checkpoint CKPT --text "..." (--style-images DIR | --writer ID) --out FILE``.

The output extension picks the format: ``.png``, ``.svg``, ``.inkml`` or ``.h5`` (the
``cashg-ink`` interchange file). Style references: ``--style-images DIR`` loads every PNG of the
folder (sorted by name; any size, converted to grayscale, resized to the model's image size, and
inverted when the background is light, so that background = 0 and ink = 1 as in the subsets);
``--writer ID --style-h5 FILE`` takes that writer's reference images from a subsets ``style.h5``.
At most ``--n-refs`` references are used, evenly spaced over the sorted list; by default the
checkpoint's ``model.style_refs``, the number the model was trained with (the generate stage
always uses that number).

Characters absent from the checkpoint's training inventory (``extra["char_inventory"]``) are
reported on stderr (the text is still generated as given; ``--strict`` makes them an error).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

FORMATS = (".png", ".svg", ".inkml", ".h5")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", required=True, help="model checkpoint (.pt)")
    parser.add_argument("--text", required=True, action="append",
                        help="text to write (repeat for several lines)")
    style = parser.add_mutually_exclusive_group(required=True)
    style.add_argument("--style-images", type=Path, help="folder of reference glyph PNGs")
    style.add_argument("--writer", help="writer id in --style-h5")
    parser.add_argument("--style-h5", type=Path, help="subsets style.h5 (with --writer)")
    parser.add_argument("--n-refs", type=int, default=None,
                        help="reference images used (default: the checkpoint's model.style_refs,"
                             " the number it was trained with)")
    parser.add_argument("--out", required=True, type=Path,
                        help="output file: .png, .svg, .inkml or .h5 (cashg-ink)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--greedy", action="store_true", help="most probable points, no sampling")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--bias", type=float, default=0.0, help="sampling bias (>0 = neater)")
    parser.add_argument("--max-char-points", type=int, default=100)
    parser.add_argument("--strict", action="store_true",
                        help="fail on characters not in the training inventory")
    parser.add_argument("--device", default="cpu")


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


def load_style_h5(path: Path, writer: str, size: int, n_refs: int):
    """(R, size, size) float32 from a subsets ``style.h5`` (uint8, background 0, ink 255)."""
    import numpy as np

    from cashg.core.subsets.readers import StyleReader

    reader = StyleReader(path)
    by_writer = reader.indices_by_writer()
    if writer not in by_writer or not len(by_writer[writer]):
        raise ValueError(f"{path}: no reference images for writer {writer!r}")
    images = reader.writer_images(writer).astype(np.float32) / 255.0
    reader.close()
    if images.shape[1:] != (size, size):
        raise ValueError(f"{path}: images are {images.shape[1:]}, the model needs {size}x{size}")
    return _select(images, n_refs)


def write_output(sentences, out: Path) -> None:
    from cashg.core.ink import write_ink
    from cashg.render import render_inkml, render_png, render_svg

    out.parent.mkdir(parents=True, exist_ok=True)
    ext = out.suffix.lower()
    if ext == ".png":
        render_png(sentences, out)
    elif ext == ".svg":
        render_svg(sentences, out)
    elif ext == ".inkml":
        render_inkml(sentences, out)
    elif ext == ".h5":
        write_ink(out, sentences)
    else:
        raise ValueError(f"{out}: unsupported extension (use one of {', '.join(FORMATS)})")


def unknown_characters(texts: list[str], inventory: list[str] | None) -> list[str]:
    """Sorted characters of ``texts`` missing from ``inventory`` (none when no inventory)."""
    if inventory is None:
        return []
    known = set(inventory)
    return sorted({c for t in texts for c in t} - known)


def run(args: argparse.Namespace) -> int:
    import torch

    from cashg.model.checkpoint import load_model
    from cashg.sampling import SamplingOptions, generate_sentences

    if args.out.suffix.lower() not in FORMATS:
        print(f"cashg generate: {args.out}: unsupported extension (use one of "
              f"{', '.join(FORMATS)})", file=sys.stderr)
        return 2
    if args.writer is not None and args.style_h5 is None:
        print("cashg generate: --writer needs --style-h5", file=sys.stderr)
        return 2
    model, cfg, extra = load_model(args.checkpoint, map_location=args.device)
    inventory = extra.get("char_inventory")
    missing = unknown_characters(args.text, inventory)
    if inventory is None:
        print("cashg generate: the checkpoint has no char_inventory; cannot check characters",
              file=sys.stderr)
    if missing:
        print(f"cashg generate: characters never seen in training: {missing!r}", file=sys.stderr)
        if args.strict:
            return 1
    n_refs = cfg.style_refs if args.n_refs is None else args.n_refs
    if n_refs < 1:
        print(f"cashg generate: --n-refs must be >= 1, got {n_refs}", file=sys.stderr)
        return 2
    try:
        if args.style_images is not None:
            refs = load_style_folder(args.style_images, cfg.style_image_size, n_refs)
            writer = args.style_images.name
        else:
            refs = load_style_h5(args.style_h5, args.writer, cfg.style_image_size, n_refs)
            writer = args.writer
    except ValueError as exc:
        print(f"cashg generate: {exc}", file=sys.stderr)
        return 1
    opts = SamplingOptions(greedy=args.greedy, temperature=args.temperature, bias=args.bias,
                           max_char_points=args.max_char_points, seed=args.seed)
    sentences = generate_sentences(model, list(args.text), torch.from_numpy(refs), opts,
                                   writer_id=str(writer))
    write_output(sentences, args.out)
    print(f"cashg generate: wrote {len(sentences)} line(s) to {args.out}", file=sys.stderr)
    return 0
