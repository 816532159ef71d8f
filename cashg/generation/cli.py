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

from cashg.generation.options import add_option_arguments, options_from_args
from cashg.generation.outputs import FORMATS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``cashg generate``; the sampling ones derived from
    :class:`~cashg.core.config.model.SamplingOptions` (:mod:`cashg.generation.options`)."""
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
    parser.add_argument("--strict", action="store_true",
                        help="fail on characters not in the training inventory")
    parser.add_argument("--device", default="cpu")
    add_option_arguments(parser)  # the SamplingOptions fields: --seed, --greedy, ...


def run(args: argparse.Namespace) -> int:
    """Generate the ``--text`` lines and write them to ``--out``; 0, or 1/2 on bad input."""
    import torch

    from cashg.generation import sampling
    from cashg.generation.inputs import load_style_folder, load_style_h5, unknown_characters
    from cashg.generation.outputs import write_output
    from cashg.model.checkpoint import load_model

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
    sentences = sampling.generate_sentences(model, list(args.text), torch.from_numpy(refs),
                                            options_from_args(args), writer_id=str(writer))
    write_output(sentences, args.out)
    print(f"cashg generate: wrote {len(sentences)} line(s) to {args.out}", file=sys.stderr)
    return 0
