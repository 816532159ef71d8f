"""Typed configs for the model-side sections of ``params.yaml`` (model, training, evaluation)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import ClassVar, Literal

from cashg.core.protocols import ProtocolName


@dataclass(frozen=True)
class ModelConfig:
    """CASHG architecture (paper Sec. 3, appendix C). Owned by cashg/model.

    Defaults are the paper setting (hidden 512, 8 heads, K = 20, frozen ``google/canine-c``,
    ResNet18 style identifier). ``text_backbone`` is a Hugging Face hub id or a local directory
    loaded with ``CanineModel.from_pretrained``; the literal ``"random-canine"`` builds a randomly
    initialised CANINE of the ``canine_*`` sizes instead (an explicit, logged choice for offline
    demos; the default ``canine_*`` sizes are canine-c's architecture).
    """

    # Character Context Encoder (Sec. 3.1, appendix C.1)
    text_backbone: str = "google/canine-c"
    freeze_text_backbone: bool = True
    canine_hidden: int = 768
    canine_layers: int = 12
    canine_heads: int = 12
    canine_intermediate: int = 3072
    canine_hash_buckets: int = 16384
    canine_seed: int = 0  # seed of the random CANINE initialisation (random-canine only)
    code_table_size: int = 8192  # phi(u): code point u hashed as u mod code_table_size
    code_dim: int = 64  # width of phi(u) before the projection P
    alpha_init: float = 0.1  # alpha = softplus(raw) > 0, initialised to this value
    ctx_layers: int = 2  # TransEnc_ctx depth (light Transformer encoder)
    # shared widths
    d_model: int = 512
    n_heads: int = 8
    ffn_dim: int = 2048
    dropout: float = 0.1
    # style encoder (SDT-style: ResNet18 front-end + Transformer encoder + writer/glyph heads)
    # Style reference images per sample: ONE number for training batches, held-out
    # evaluation, the training sample lines and generation (the checkpoint stores this config,
    # so generation reads it from there). The authors use 15 for training and inference
    # (configs/English_MERGING_SENT_512dim.yml: TRAIN / VALID NUM_REFERENCE_IMGS). A writer
    # with fewer images repeats some (training: drawn with replacement; generation: cyclically).
    style_refs: int = 15
    style_image_size: int = 64
    style_cnn_width: int = 64  # ResNet18 base width (64 in ResNet18)
    style_layers: int = 2  # shared style Transformer encoder depth
    style_head_layers: int = 1  # depth of each of the writer and glyph heads
    supcon_dim: int = 256  # projection width for the two SupCon losses
    # Bi-SWT decoder (Sec. 3.2): a writer branch then a glyph branch, as in SDT
    writer_decoder_layers: int = 2
    glyph_decoder_layers: int = 2
    rope_base: float = 10000.0
    # Trajectory-token input (the paper does not specify the token embedding): besides the
    # point's offset and pen state, also embed the pen position relative to the character's
    # first point (the running sum of its offsets). Off = the offset and pen state only.
    point_position: bool = False
    # Also add the character's identity embedding to each of its trajectory tokens (besides the
    # identity token that opens its part of the window). Off = the identity token only.
    identity_every_token: bool = False
    # Placement inputs (not in the paper: the paper's tokens carry offsets only): also embed
    # the character's ink so far as a box relative to the pen (where a stroke after a pen lift
    # starts), and the pen's height in the line's height-normalised frame (the running sum of
    # the sample's y offsets from its origin: how far the line has drifted). Off = not embedded.
    char_extent: bool = False
    line_position: bool = False
    # Also embed which stroke of its character a trajectory token belongs to (0 for the
    # points before the character's first pen lift, 1 after it, ...; the last embedding
    # shared by every stroke from model.MAX_STROKE_INDEX on): a capital's or a digit's later
    # strokes (an H's second stem, then its bar) are told apart by their number, which
    # attention over offset tokens otherwise has to count. Off = not embedded (the paper's).
    stroke_index: bool = False
    # Also embed how many points of its character came before a trajectory token (log scale,
    # model.COUNT_SCALE): the character's clock. Without it the decoder knows how long it has
    # been drawing only through RoPE distances to the identity token; with it, ending a
    # character can depend on its length directly. Off = not embedded (the paper's).
    point_count: bool = False
    # GMM head (appendix C.4)
    n_mixtures: int = 20
    sigma_eps: float = 1e-4  # sigma = softplus(.) + sigma_eps, normalised (height 1) units
    # a space's gap point predicted in units of the writer's word gap (the median gap of its
    # other lines; the training sentences' median where unknown): the mixture's x target at
    # the gap is divided by it and a sampled gap multiplied by it, so a writer the model did
    # not see still gets its own spacing; off = in the ink's units, as every point (the
    # paper's). cashg/model/relative_gap.py (RelativeGapUnit)
    relative_gap: bool = False
    # Context branch (Sec. 3.3 "each decoder block conditions on ... the position-specific
    # context memory"; app. C.2 "separate decoder branches"): blocks after the style branch
    # over the same window tokens (causal RoPE self-attention, cross-attention to the context
    # memory, feed-forward) whose output Eq. 1's gate blends with h_sty. The authors' code uses
    # one such block (handwriting_generator.py, context_layers=1). 0 = Eq. 1 blends the raw
    # context vector m_ctx_{s(t)} (no branch; this project's reading before the branch).
    context_layers: int = 1
    # what the branch's cross-attention reads: "character" = the window's current character's
    # context vector m_ctx_s (one key; the authors' code, full_model.py: one context token per
    # window), "sentence" = the whole sentence's context memory M_ctx (padding masked)
    context_memory: Literal["character", "sentence"] = "character"
    # ablation switches (Sec. 4.4): off = no predecessor in the window / h = h_sty (no
    # context branch, no gate, no context memory)
    bi_swt: bool = True
    gated_fusion: bool = True

    def __post_init__(self) -> None:
        if self.context_memory not in ("character", "sentence"):  # params files: params.py
            raise ValueError(f"model.context_memory must be 'character' or 'sentence', got "
                             f"{self.context_memory!r}")
        if self.style_refs < 1:
            raise ValueError(f"model.style_refs must be >= 1, got {self.style_refs}")
        if self.context_layers < 0:
            raise ValueError(f"model.context_layers must be >= 0, got {self.context_layers}")

    @property
    def reads_writer_word_gap(self) -> bool:
        """Whether the model is given each writer's measured word gap (``relative_gap``)."""
        return self.relative_gap


@dataclass(frozen=True)
class PerturbConfig:
    """Deterministic perturbation of the ground truth used by the evaluate stage's sanity run.

    ``jitter``: std of the Gaussian noise added to every point, in units of the sentence
    height; ``flip_fraction``: fraction of adjacent-character boundary labels toggled between
    CURSIVE_EOC and EOC; ``spacing``: each word is shifted by a uniform offset in
    [-spacing, spacing] heights (cumulative along the line), changing word gaps.
    """

    seed: int = 0
    jitter: float = 0.01
    flip_fraction: float = 0.2
    spacing: float = 0.1


@dataclass(frozen=True)
class EvaluateConfig:
    """Evaluation protocol options (paper Sec. 4.1, appendix E). Owned by cashg/evaluation.

    ``protocol``: a :data:`cashg.core.protocols.ProtocolName` (its metrics:
    ``cashg.evaluation.protocols``). ``dtw_variant``: ``protocol`` (the protocol's own DTW:
    exact, the paper's metric, except SDT's for ``sdt_glyph``) or a fixed one of exact and the
    peers' sdt / olhwg definitions. ``infer_cursive``: derive the prediction's CURSIVE_EOC labels with
    the distance heuristic (threshold ``tau_conn``) for methods that do not predict them.
    """

    protocol: ProtocolName = "merged"
    dtw_variant: Literal["protocol", "exact", "sdt", "olhwg"] = "protocol"
    infer_cursive: bool = False
    eps: float = 1e-6  # appendix E
    rho: float = 0.5  # KGS/SSS overlap penalty
    tau_conn: float = 0.005  # cursive heuristic threshold, normalised units
    seg_error_threshold: int = 3  # DeepWriting: exclude sentences with >= 3 bad characters
    sdt_radius: int = 1  # FastDTW radius of the SDT-style variant
    olhwg_rdp_epsilon: float = 0.02  # RDP epsilon of the OLHWG-style variant
    olhwg_radius: int = 1  # FastDTW radius of the OLHWG-style variant
    plot_sentences: int = 4  # sentences in the GT-vs-prediction grid
    perturb: PerturbConfig = PerturbConfig()


@dataclass(frozen=True)
class StageWeights:
    """Loss weights of one curriculum stage (paper appendix A, "Implementation mapping").

    ``L_total = char L_char + bigram L_bi + sentence L_sent + style L_style``; a stream whose
    weight is 0 is not sampled at all in that stage.
    """

    char: float = 1.0
    bigram: float = 0.0
    sentence: float = 0.0
    style: float = 1.0


@dataclass(frozen=True)
class TrainConfig:
    """Curriculum training (paper Sec. 3.4, appendix A, Tables A1/A2). Owned by cashg/training.

    Defaults are the paper's merged-English setting: stage 1 [0, 10k) char only, stage 2
    [10k, 50k) + bigram, stage 3 [50k, 1M] + sentence; AdamW lr 8e-5 with a 30k-iteration
    warm-up and a 1k re-warm-up after each stage change; clip 1.0; batches 64/64/16 with the
    sentence stream accumulated over 4 micro-batches (ratio 1:1:4); VDL 0.01 on bigrams and a
    sentence VDL warmed up 0 -> 0.02 over [60k, 80k). Per-stage weights follow the appendix's
    implementation mapping (Table A2's 0/1 columns say which streams are active).
    """

    seed: int = 0
    total_iters: int = 1_000_000
    stage2_start: int = 10_000
    stage3_start: int = 50_000
    # optimisation (Table A1)
    lr: float = 8e-5
    weight_decay: float = 0.01  # not given in the paper: torch's AdamW default
    betas: tuple[float, ...] = (0.9, 0.999)
    warmup_iters: int = 30_000
    stage_warmup_iters: int = 1_000
    # linear decay of the rate to lr_decay_final x over [lr_decay_start, lr_decay_end), held
    # after; end <= start = no decay (the paper's schedule: constant after the warm-ups). Its own
    # end, not total_iters, so that total_iters stays resume-neutral.
    lr_decay_start: int = 0
    lr_decay_end: int = 0
    lr_decay_final: float = 0.1
    grad_clip: float = 1.0
    batch_char: int = 64
    batch_bigram: int = 64
    batch_sentence: int = 16
    sentence_accum: int = 4
    # losses (appendix A)
    stage1: StageWeights = StageWeights(char=1.0, bigram=0.0, sentence=0.0, style=1.0)
    stage2: StageWeights = StageWeights(char=0.3, bigram=1.0, sentence=0.0, style=0.3)
    stage3: StageWeights = StageWeights(char=0.3, bigram=0.5, sentence=1.0, style=0.2)
    lambda_pen: float = 1.5
    pen_class_weights: tuple[float, ...] = (1.0, 1.0, 2.0, 2.5)
    # score a space's gap point by the x marginal of the mixture (its dy is 0 by construction,
    # an unbounded density; cashg.losses.gmm_nll); False = the joint NLL at every point
    space_gap_x_only: bool = False
    vdl_bigram: float = 0.01
    vdl_bigram_in_stage3: bool = False  # Eq. appendix: lambda_vdl^bi = 0.01 for 10k <= t < 50k
    vdl_sentence: float = 0.02
    vdl_sentence_warmup_start: int = 60_000
    vdl_sentence_warmup_end: int = 80_000
    supcon_temperature: float = 0.07
    # data (the number of style references per sample is model.style_refs)
    sentence_max_chars: int = 0  # > 0: crop sentence windows to whole words (demo CPU budget)
    val_writers: int = 0  # train writers held out for validation when there is no validation split
    # > 0: char/bigram batches draw from one of this many length buckets (quantiles of the
    # sample's point count) to cut padding; 0 = the paper's plain writer-unique sampling
    length_buckets: int = 0
    # rescale the point embedding and mixture head to the data's offset scale before training
    # (cashg/training/init.py; an initialisation the paper leaves open; False = torch defaults)
    data_init: bool = False
    # run the packed step (forward and losses) through torch.compile (cashg/training/compiled.py;
    # the same losses and gradients, one graph without breaks); compile_mode: torch.compile's
    # mode ("default", "reduce-overhead" = CUDA graphs, "max-autotune", "max-autotune-no-cudagraphs").
    # Off in every profile, kept: no faster on a CPU core; on a GPU, whose step is bound by
    # kernel launches, it is the alternative to cuda_graphs, not yet measured (docs/performance.md)
    compile: bool = False
    compile_mode: str = "default"
    # pad every data-dependent size of the step to one of a few per stage (cashg/model/
    # static_shapes.py; the same losses within float rounding, more arithmetic on padding)
    static_shapes: bool = False
    # replay the step as CUDA graphs, one capture per shape (cashg/training/graphed.py;
    # implies static_shapes; a CUDA device; a failed capture trains eagerly with a warning).
    # Both on in the GPU profile only: the padding serves the replay, which needs a CUDA device
    cuda_graphs: bool = False
    # sample from an exponential moving average of the weights (cashg/training/ema.py): 0 = the
    # last weights; else the average starts as a copy after ema_start iterations and moves
    # 1 - ema_decay of the way to the weights after every step (model.pt holds the average;
    # the training itself is unchanged). Off in every profile, kept for longer schedules: on
    # the demo's, still learning at its end, every average read worse (docs/results-log.md)
    ema_decay: float = 0.0
    ema_start: int = 0
    # writer augmentation (cashg/training/augment.py; not in the paper): each training writer
    # drawn as a slightly different writer every iteration, its target ink and its style
    # references slanted alike by a shear uniform in [-augment_shear, augment_shear]; 0 = off
    augment_shear: float = 0.0
    # training on the model's own strokes (not in the paper; the authors' released trainer
    # carries a two-pass mode like it, off in their configs): a first, gradient-free pass
    # predicts every point's offset (the most probable component's mean), and the trained
    # pass reads a blend of the true and the predicted offsets as its point inputs, the
    # targets unchanged, so that the model learns to go on from strokes of its own making
    # (cashg/training/packed.py, own_stroke_inputs). own_strokes: the blend's share of the
    # prediction, reached linearly over stage 1 (0 at iteration 0, own_strokes from
    # stage2_start on); 0 = off. The eager step only (not with cuda_graphs or compile)
    own_strokes: float = 0.0
    # where and how the train stage runs (read by it; flags of `cashg train` override them).
    # device: auto (CUDA when there is one) | cpu | cuda; bf16: bf16 autocast (the paper:
    # AMP off); workers: DataLoader processes that prepare the next batches (batches are pure
    # functions of the iteration, so the count never changes them)
    device: str = "auto"
    bf16: bool = False
    workers: int = 0
    # a time budget for the whole training, in seconds (None: the schedule as written). The
    # stage first times each curriculum stage's steps on this machine, then scales every
    # iteration count alike so that the steps fill what is left (cashg/training/
    # fit_schedule.py): the curriculum keeps its shape and no stage is left without steps.
    # For a trial on a new machine; a run to keep trains its schedule
    seconds: float | None = None
    # bookkeeping (not part of the resume-compatibility hash)
    log_interval: int = 100
    eval_interval: int = 5_000
    eval_batches: int = 4  # held-out batches per stream at each evaluation
    sample_lines: int = 2  # rendered test-writer lines per evaluation
    sample_max_chars: int = 24
    checkpoint_interval: int = 5_000
    keep_last: int = 3
    max_nonfinite_steps: int = 20  # consecutive non-finite steps that stop the run

    # keys of earlier versions -> where they live now (cashg.core.params names both in its error)
    moved_keys: ClassVar[dict[str, str]] = {"style_refs": "model.style_refs"}
    compile_modes: ClassVar[tuple[str, ...]] = ("default", "reduce-overhead", "max-autotune",
                                                "max-autotune-no-cudagraphs")

    def __post_init__(self) -> None:
        if not 0.0 <= self.ema_decay < 1.0:
            raise ValueError(f"train.ema_decay must be in [0, 1), got {self.ema_decay}")
        if not 0.0 <= self.augment_shear <= 0.5:
            raise ValueError(f"train.augment_shear must be in [0, 0.5], got {self.augment_shear}")
        if self.ema_start < 0:
            raise ValueError(f"train.ema_start must be >= 0, got {self.ema_start}")
        if not 0.0 <= self.own_strokes <= 1.0:
            raise ValueError(f"train.own_strokes must be in [0, 1], got {self.own_strokes}")
        if self.own_strokes > 0 and (self.cuda_graphs or self.compile):
            raise ValueError("train.own_strokes runs the eager step only: set train.cuda_graphs"
                             " and train.compile to false")
        if self.cuda_graphs and self.compile:
            raise ValueError("train.cuda_graphs and train.compile are exclusive: choose one "
                             "(compile_mode reduce-overhead is compile's own CUDA graphs)")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"train.device must be auto, cpu or cuda, got {self.device!r}")
        if self.workers < 0:
            raise ValueError(f"train.workers must be >= 0, got {self.workers}")
        if self.seconds is not None and self.seconds <= 0:
            raise ValueError(f"train.seconds must be > 0 (or null: no budget), got"
                             f" {self.seconds}")
        if self.compile_mode not in self.compile_modes:
            raise ValueError(f"train.compile_mode must be one of {', '.join(self.compile_modes)}"
                             f", got {self.compile_mode!r}")


def _opt(default, help: str):
    """A field with its command-line help (``cashg generate`` derives its flags from the
    fields of :class:`SamplingOptions`: :func:`cashg.generation.options.add_option_arguments`)."""
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class SamplingOptions:
    """How the autoregressive sampler chooses points (:mod:`cashg.generation.sampling`); the
    one definition of the decoding options: the ``generate`` params section
    (:class:`GenerateConfig`) is these fields plus its own, and the flags of ``cashg generate``
    are derived from them (one edit adds an option everywhere).

    ``greedy``: the mean of the most probable mixture component and the most probable pen
    state at every step, the authors' decoding (their ``src/model/handwriting_generator.py``:
    ``get_seq_from_gmm(..., decode="argmax_onehot")``); otherwise a stochastic sample at
    ``temperature`` with Graves' sampling ``bias`` (Graves 2013, Sec. 5.4: sharper mixture
    weights, smaller sigma).
    """

    seed: int = _opt(0, "seed of the sampler's random generator")
    greedy: bool = _opt(False, "most probable points, no sampling (the authors' decoding)")
    temperature: float = _opt(1.0, "sampling temperature (> 0; stochastic sampling only)")
    bias: float = _opt(0.0, "Graves' sampling bias (> 0 = neater; stochastic sampling only)")
    max_char_points: int = _opt(100, "points per character at most (then the character "
                                     "ends, counted as truncated)")
    min_char_points: int = _opt(1, "end-of-character states are impossible before this many "
                                   "points (min = max: a fixed number per character)")
    space_mode: bool = _opt(False, "a space's points at its most probable mixture mean "
                                   "(word gaps without the sampling's short tail); other "
                                   "characters as set above")
    lift_mode: bool = _opt(False, "a point that follows a pen lift (a stroke's or "
                                  "character's start) at its most probable mixture mean")
    use_cache: bool = _opt(True, "key/value cache (off: the uncached reference computation, "
                                 "same points up to float rounding)")
    check: int = _opt(0, "draw each character this many times and keep the drawing the "
                         "benchmark's glyph reader reads best (0 = off: the model alone)")


@dataclass(frozen=True)
class GenerateConfig(SamplingOptions):
    """Generation of a held-out split for evaluation (paper Sec. 4: one fully autoregressive
    sample per input of a held-out split): each experiment's split
    (``experiments.<name>.split``: test for Table 2, validation for the ablation cells). Owned
    by cashg/generation (generate stage, :mod:`cashg.generation.stage`).

    The decoding options are the inherited :class:`SamplingOptions` fields (batch ``k`` of a
    split samples with seed ``seed + k``). The number of style references is the
    checkpoint's ``model.style_refs`` (the number the model was trained with).
    """

    batch_size: int = 64  # sentences decoded together (rows advance independently)
    plot_lines: int = 4
    limit: int = 0  # generate only the first N sentences of the split (0 = all)
    # the decoding curve (stage decoding_curve@<experiment>, cashg/evaluation/decoding_curve.py):
    # legibility and Style Score on held-out writers at these temperatures, the rest as above
    curve_temperatures: tuple[float, ...] = (0.5, 0.7, 1.0)
    # the report's labelled "checked" row (stage checked@<experiment>,
    # cashg/evaluation/checked_stage.py): the test lines written again with this many
    # candidates per character, the benchmark's glyph reader keeping the one it reads best;
    # Table 2 itself stays the model alone (``check``, 0 by default)
    checked_row: int = 4

    def __post_init__(self) -> None:
        if self.checked_row < 1:
            raise ValueError(f"generate.checked_row must be >= 1, got {self.checked_row}")

    # keys of earlier versions -> where they live now (cashg.core.params names both in its error)
    moved_keys: ClassVar[dict[str, str]] = {"n_refs": "model.style_refs"}

    def sampling(self, batch: int = 0) -> SamplingOptions:
        """The sampling options of batch ``batch`` of a split (seed ``seed + batch``)."""
        opts = {f.name: getattr(self, f.name) for f in fields(SamplingOptions)}
        return SamplingOptions(**{**opts, "seed": self.seed + batch})


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


CASHG_SECTIONS: dict[str, type | object] = {"model": ModelConfig, "evaluate": EvaluateConfig,
                                           "train": TrainConfig, "generate": GenerateConfig,
                                           "recognizer": RecognizerConfig}
