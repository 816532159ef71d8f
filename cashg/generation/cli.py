"""``cashg generate --checkpoint CKPT --text "..." (--style-images DIR | --writer ID) --out FILE``.

The output extension picks the format: ``.png``, ``.svg``, ``.inkml`` or ``.h5`` (the
``cashg-ink`` interchange file). Pictures (PNG, SVG) show one line per ``--text``, each cropped
to its ink plus a margin, ``--width`` pixels wide (the height follows the ink); SVG strokes are
smooth Bezier paths (:mod:`cashg.generation.render`).

Style references: ``--style-images DIR`` loads every PNG of the folder (sorted by name; any
size, converted to grayscale, resized to the model's image size, and inverted when the
background is light, so that background = 0 and ink = 1 as in the subsets); ``--writer ID
--style-h5 FILE`` takes that writer's reference images from a subsets ``style.h5`` (an unknown
id is an error that lists the file's writers). At most ``--n-refs`` references are used, evenly
spaced over the sorted list; by default the checkpoint's ``model.style_refs``, the number the
model was trained with (the generate stage always uses that number).

Decoding: a sampling flag given on the command line wins; the others come from the ``generate``
section of ``--params FILE``, else of ``./params.yaml`` when there is one (``--no-params``
skips it), else from the :class:`~cashg.core.config.generate.SamplingOptions` defaults. So in a
checkout of the pipeline the command decodes as the generate stage does (the tuned temperature
and modes of ``params.yaml``), and one line on stderr says where the decoding came from and its
values. The checkpoint does not carry the decoding on purpose: the train stage would then
depend on the ``generate`` params, and DVC would retrain the model at every decoding change
(the decoding is tuned after training, on the trained model).

Checked writing (:mod:`cashg.generation.check`): ``--check K`` draws each character K times
and keeps the drawing the benchmark's glyph reader reads best; ``--check 0`` is the model
alone. The reader is ``--reader FILE``, else the one the pipeline trained for the benchmark of
``--style-h5`` (``results/subsets/<b>/<split>/style.h5`` ->
``results/recognizer/<b>/glyph_reader.pt``). Without ``--check``, a found reader checks with
the params' ``generate.checked_row`` candidates (the figures in docs/generate.md say what it
buys and costs), and no reader means the model alone; the stderr line says which.

Characters absent from the checkpoint's training inventory (``extra["char_inventory"]``) are
reported on stderr (the text is still generated as given; ``--strict`` makes them an error).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cashg.core.config.generate import SamplingOptions
from cashg.generation.options import add_option_arguments, flag, given_options
from cashg.generation.outputs import FORMATS

DEFAULT_PARAMS = Path("params.yaml")  # looked for in the working directory


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``cashg generate``; the sampling ones derived from
    :class:`~cashg.core.config.generate.SamplingOptions` (:mod:`cashg.generation.options`)."""
    from cashg.generation.render import WIDTH

    parser.add_argument("--checkpoint", required=True, help="model checkpoint (.pt)")
    parser.add_argument("--text", required=True, action="append",
                        help="text to write (repeat for several lines)")
    style = parser.add_mutually_exclusive_group(required=True)
    style.add_argument("--style-images", type=Path,
                       help="folder of reference glyph PNGs (any size; light or dark background)")
    style.add_argument("--writer", help="writer id in --style-h5 (e.g. brush:55)")
    parser.add_argument("--style-h5", type=Path, help="subsets style.h5 (with --writer)")
    parser.add_argument("--n-refs", type=int, default=None,
                        help="reference images used (default: the checkpoint's model.style_refs,"
                             " the number it was trained with)")
    parser.add_argument("--out", required=True, type=Path,
                        help="output file: .png, .svg, .inkml or .h5 (cashg-ink)")
    parser.add_argument("--width", type=int, default=WIDTH,
                        help="width in pixels of a .png (the SVG's width attribute); the height "
                             f"follows the ink (default: {WIDTH})")
    params = parser.add_mutually_exclusive_group()
    params.add_argument("--params", type=Path, default=None,
                        help="params file whose generate section gives the decoding defaults "
                             f"(default: ./{DEFAULT_PARAMS} if it exists)")
    params.add_argument("--no-params", action="store_true",
                        help=f"ignore ./{DEFAULT_PARAMS}: the built-in decoding defaults")
    parser.add_argument("--strict", action="store_true",
                        help="fail on characters not in the training inventory")
    parser.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    parser.add_argument("--reader", type=Path, default=None,
                        help="glyph reader for --check (default: the pipeline's reader of the "
                             "--style-h5 benchmark, results/recognizer/<b>/glyph_reader.pt)")
    add_option_arguments(parser)  # the SamplingOptions fields: --seed, --greedy, ...


def params_file(args: argparse.Namespace, cwd: Path | None = None) -> Path | None:
    """The params file of the decoding defaults: ``--params``, else ``./params.yaml`` when it
    exists (and ``--no-params`` is not given), else None."""
    if args.params is not None:
        return args.params
    local = (cwd or Path.cwd()) / DEFAULT_PARAMS
    return None if args.no_params or not local.is_file() else DEFAULT_PARAMS


def pipeline_reader(style_h5: Path | None) -> Path | None:
    """The glyph reader the pipeline trained for the benchmark of a subsets ``style.h5``
    (``results/subsets/<b>/<split>/style.h5`` -> ``results/recognizer/<b>/glyph_reader.pt``),
    or None when there is none."""
    if style_h5 is None or len(Path(style_h5).parents) < 4:
        return None
    bench_dir = Path(style_h5).parent.parent
    path = bench_dir.parent.parent / "recognizer" / bench_dir.name / "glyph_reader.pt"
    return path if path.is_file() else None


def resolve_check(args: argparse.Namespace, options: SamplingOptions
                  ) -> tuple[SamplingOptions, Path | None, str]:
    """The options with their check decided (``--check`` given, else the params'
    ``generate.checked_row`` when a reader is found, else off), the reader's path and the
    phrase that says so (module docstring)."""
    import dataclasses

    reader = args.reader if args.reader is not None else pipeline_reader(args.style_h5)
    if "check" in given_options(args):
        if options.check and reader is None:
            raise ValueError(f"--check {options.check} needs a glyph reader: give --reader, or "
                             "--writer with a pipeline's --style-h5 whose benchmark has one "
                             "(its recognizer stage trains it)")
        return options, reader, (f"each character checked {options.check} times by {reader}"
                                 if options.check else "the model alone (--check 0)")
    if reader is None:
        return (dataclasses.replace(options, check=0), None,
                "the model alone (no glyph reader found for --check)")
    k = _checked_row(args)
    return (dataclasses.replace(options, check=k), reader,
            f"each character checked {k} times by {reader} (--check 0: the model alone)")


def _checked_row(args: argparse.Namespace) -> int:
    """``generate.checked_row`` of the params file (:func:`params_file`), else its default."""
    from cashg.core.config.generate import GenerateConfig
    from cashg.core.params import load_section

    path = params_file(args)
    return (load_section("generate", path) if path is not None else GenerateConfig()).checked_row


def resolve_decoding(args: argparse.Namespace) -> tuple[SamplingOptions, str]:
    """The decoding (given flags over the params file's ``generate`` section, see
    :func:`params_file`) and the stderr line that says where it came from.

    Raises :class:`cashg.core.params.ParamsError` (a ``ValueError``) for a bad params file and
    ``OSError`` for a missing one."""
    from cashg.generation.options import decoding_defaults, describe_options, options_from_args

    path = params_file(args)
    opts = options_from_args(args, base=decoding_defaults(path))
    source = str(path) if path is not None else "the built-in defaults"
    flags = [flag(name) for name in given_options(args)]
    if flags:
        source += f" and {' '.join(flags)}"
    return opts, f"cashg generate: decoding from {source}: {describe_options(opts)}"


def run(args: argparse.Namespace) -> int:
    """Generate the ``--text`` lines and write them to ``--out``; 0, or 1/2 on bad input."""
    if args.out.suffix.lower() not in FORMATS:
        print(f"cashg generate: {args.out}: unsupported extension (use one of "
              f"{', '.join(FORMATS)})", file=sys.stderr)
        return 2
    if args.writer is not None and args.style_h5 is None:
        print("cashg generate: --writer needs --style-h5", file=sys.stderr)
        return 2
    if args.width < 1:
        print(f"cashg generate: --width must be >= 1, got {args.width}", file=sys.stderr)
        return 2
    try:
        options, note = resolve_decoding(args)
        options, reader, checked = resolve_check(args, options)
    except (OSError, ValueError) as exc:
        print(f"cashg generate: decoding defaults: {exc}", file=sys.stderr)
        return 2
    print(note, file=sys.stderr)
    print(f"cashg generate: {checked}", file=sys.stderr)
    if args.writer is not None:  # before the model loads: a wrong id fails at once
        from cashg.generation.inputs import check_writer

        try:
            check_writer(args.style_h5, args.writer)
        except ValueError as exc:
            print(f"cashg generate: {exc}", file=sys.stderr)
            return 1
    return _generate(args, options, reader)


def _generate(args: argparse.Namespace, options: SamplingOptions,
              reader: Path | None = None) -> int:
    """Load the model and the style, sample the lines with ``options``, write ``--out``."""
    import torch

    from cashg.generation import sampling
    from cashg.generation.inputs import load_style_folder, load_style_h5, unknown_characters
    from cashg.generation.outputs import write_output
    from cashg.model.checkpoint import load_model

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
    gap = None
    if model.reads_writer_word_gap:  # model.relative_gap: the writer's gap from its lines
        from cashg.generation.split import folder_writer_word_gap

        gap = folder_writer_word_gap(args.style_h5.parent, args.writer) if args.writer else None
        print("cashg generate: word gap " + (
            f"{gap:.3f}, the median of writer {args.writer}'s lines in {args.style_h5.parent}"
            if gap is not None else "unknown: the population's (the model reads it"
            " from a writer's lines beside --style-h5)"), file=sys.stderr)
    check = None
    if options.check:
        from cashg.generation.check import CharacterCheck
        from cashg.recognition.glyphs import reader_for_check

        try:
            check = CharacterCheck(reader_for_check(reader, options.check), options.check)
        except ValueError as exc:
            print(f"cashg generate: {exc}", file=sys.stderr)
            return 2
    sentences = sampling.generate_sentences(model, list(args.text), torch.from_numpy(refs),
                                            options, writer_id=str(writer), writer_word_gap=gap,
                                            check=check)
    write_output(sentences, args.out, width=args.width)
    print(f"cashg generate: wrote {len(sentences)} line(s) to {args.out}", file=sys.stderr)
    return 0

