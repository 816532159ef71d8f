"""Typed configs of the ``recognizer`` section of ``params.yaml``: the legibility recognizer and the glyph reader (not the paper's)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RecognizerFeatureConfig:
    """How a line becomes recognizer input (:mod:`cashg.recognition.features`).

    Coordinates are divided by the line's median character height and the running median of
    y (over ``baseline_window`` character heights either side of each point) is subtracted, so
    drifting or small generated lines look like the ground truth; the standardised features
    are clipped to ``[-clip, clip]`` (a guard against degenerate generated lines).
    ``point_spacing`` > 0 resamples every pen-down stroke at that arc-length step (character
    heights), so that one recognizer reads lines of any point density alike: training windows
    (weak RDP), unsimplified test ground truth (the DSD protocol) and generated lines. 0 (the
    default, and the value of recognizers saved without the key) keeps the points as given.
    """

    baseline_window: float = 2.0
    clip: float = 10.0
    point_spacing: float = 0.0


@dataclass(frozen=True)
class RecognizerModelConfig:
    """Recognizer network (:mod:`cashg.recognition.model`): three Conv1d + BatchNorm + ReLU
    blocks (the last ``downsample`` factor split over them as strides of 2), a bidirectional
    LSTM of ``layers`` layers with ``hidden`` units per direction, a linear CTC head."""

    conv_channels: int = 128
    kernel: int = 5
    downsample: int = 4  # 1, 2 or 4: frames per input point divided by this
    hidden: int = 128
    layers: int = 2


@dataclass(frozen=True)
class RecognizerTrainConfig:
    """Recognizer training (:mod:`cashg.recognition.train`). A fixed iteration budget (not
    seconds), batches and augmentation drawn from ``(seed, iteration)``: reruns on CPU give the
    same checkpoint. Adam with a linear warm-up and a cosine decay to ``final_lr_fraction``.
    ``x_scale`` / ``shear``: each training line is stretched in x by a factor in
    ``[1 - x_scale, 1 + x_scale]`` and sheared by a slope in ``[-shear, shear]``.
    ``val_writers`` training writers are held out to report a validation CER."""

    seed: int = 0
    iterations: int = 1200
    batch_size: int = 16
    lr: float = 3e-3
    warmup_iters: int = 100
    final_lr_fraction: float = 0.02
    grad_clip: float = 5.0
    x_scale: float = 0.15
    shear: float = 0.3
    val_writers: int = 5


@dataclass(frozen=True)
class GlyphReaderConfig:
    """The glyph reader (:mod:`cashg.recognition.glyphs`): a CNN naming one glyph from its
    picture in the line's frame, trained on the benchmark's ground-truth glyphs, that the
    glyph test (:mod:`cashg.evaluation.glyph_test`) reads glyphs with.

    The picture: ``image_size`` pixels over ``span`` x ``span`` sentence heights, centred on
    the glyph's box in x, from ``top`` down in y; strokes about 2 pixels wide. Training:
    ``iterations`` batches of ``batch_size`` glyphs, AdamW at ``lr`` (warm-up, cosine decay),
    ``width`` channels in the first conv block, each glyph under a random map: shear in
    +-``shear``, scale e^+-``scale`` (and the y/x ratio e^+-``aspect``), rotation +-``rotation``
    degrees, shift +-``shift`` sentence heights."""

    image_size: int = 32
    span: float = 1.5
    top: float = -0.25
    width: int = 16
    iterations: int = 1000
    batch_size: int = 64
    lr: float = 2.0e-3
    seed: int = 0
    shear: float = 0.3
    scale: float = 0.15
    aspect: float = 0.1
    rotation: float = 5.0
    shift: float = 0.05


@dataclass(frozen=True)
class RecognizerConfig:
    """The ``recognizer`` params section: a small online handwriting recognizer per listed
    benchmark, trained on its ground-truth training lines, that scores the legibility of
    generated lines (CER / WER in ``cashg evaluate``). Owned by cashg/recognition.

    ``benchmarks``: the benchmarks (keys of ``subsets.benchmarks``, each with a sentence
    subset) that get a ``recognizer@<benchmark>`` stage; their evaluations report CER / WER.
    """

    benchmarks: tuple[str, ...] = ()
    features: RecognizerFeatureConfig = RecognizerFeatureConfig()
    model: RecognizerModelConfig = RecognizerModelConfig()
    train: RecognizerTrainConfig = RecognizerTrainConfig()
    glyphs: GlyphReaderConfig = GlyphReaderConfig()
