"""Curriculum schedules as pure functions of the iteration (paper appendix A).

Iterations count completed optimizer steps from 0; iteration ``t`` is the (t+1)-th update.

- :func:`curriculum_stage` - 1 on ``[0, stage2_start)``, 2 on ``[stage2_start, stage3_start)``,
  3 from ``stage3_start`` on (Table A2).
- :func:`learning_rate` - ``lr * ramp(t, warmup_iters) * ramp(t - s_k, stage_warmup_iters)``
  where ``ramp(u, n) = min(1, (u + 1) / n)`` and ``s_k`` is the start of the current stage
  (stage 1 has no re-warm-up). The initial 30k warm-up and the 1k stage-transition warm-up
  (Table A1) therefore compose multiplicatively: at a stage change the rate drops and climbs
  back to the value the initial warm-up allows. The paper gives no decay (the default); a
  short run may decay linearly to ``lr_decay_final`` x over ``[lr_decay_start,
  lr_decay_end)`` (the demo profile: a budget of a few thousand steps ends at a high constant
  rate otherwise, and its stage-3 steps then make the glyphs worse, not better).
- :func:`stage_weights` - the per-stage loss weights.
- :func:`vdl_weights` - ``(lambda_vdl^bi, lambda_vdl^sent(t))``, Eq. appendix_vdl_schedule.
- :func:`stream_plan` - which streams are sampled and with how many micro-batches
  (minibatch ratio 1:0:0 / 1:1:0 / 1:1:A with A = ``sentence_accum``).
"""

from __future__ import annotations

from dataclasses import dataclass

from cashg.core.config.train import StageWeights, TrainConfig

STREAMS = ("char", "bigram", "sentence")


def curriculum_stage(t: int, cfg: TrainConfig) -> int:
    """The curriculum stage (1, 2 or 3) of iteration ``t``."""
    if t < 0:
        raise ValueError(f"iteration must be >= 0, got {t}")
    if t < cfg.stage2_start:
        return 1
    if t < cfg.stage3_start:
        return 2
    return 3


def stage_start(stage: int, cfg: TrainConfig) -> int:
    """First iteration of ``stage``."""
    return {1: 0, 2: cfg.stage2_start, 3: cfg.stage3_start}[stage]


def _ramp(u: int, n: int) -> float:
    return 1.0 if n <= 0 else min(1.0, (u + 1) / n)


def learning_rate(t: int, cfg: TrainConfig) -> float:
    """The learning rate of iteration ``t`` (see the module docstring)."""
    stage = curriculum_stage(t, cfg)
    lr = cfg.lr * _ramp(t, cfg.warmup_iters)
    if stage > 1:
        lr *= _ramp(t - stage_start(stage, cfg), cfg.stage_warmup_iters)
    return lr * _decay(t, cfg)


def _decay(t: int, cfg: TrainConfig) -> float:
    span = cfg.lr_decay_end - cfg.lr_decay_start
    if span <= 0 or t < cfg.lr_decay_start:
        return 1.0
    frac = min(1.0, (t - cfg.lr_decay_start) / span)
    return 1.0 + frac * (cfg.lr_decay_final - 1.0)


def stage_weights(t: int, cfg: TrainConfig) -> StageWeights:
    """Loss weights (char, bigram, sentence, style) in force at iteration ``t``."""
    return (cfg.stage1, cfg.stage2, cfg.stage3)[curriculum_stage(t, cfg) - 1]


def used_streams(cfg: TrainConfig) -> tuple[str, ...]:
    """The streams some curriculum stage samples (weight > 0): the subsets training reads.
    A glyph-level benchmark (char and style subsets only) trains with the other weights 0
    (:func:`cashg.core.experiments.experiment_overrides`) and has no other file to read."""
    stages = (cfg.stage1, cfg.stage2, cfg.stage3)
    return tuple(s for s in STREAMS if any(getattr(w, s) > 0 for w in stages))


def vdl_weights(t: int, cfg: TrainConfig) -> tuple[float, float]:
    """``(lambda_vdl^bi, lambda_vdl^sent)`` at iteration ``t``.

    Bigram: ``vdl_bigram`` for ``stage2_start <= t < stage3_start`` (and after, only when
    ``vdl_bigram_in_stage3``). Sentence: 0 before ``vdl_sentence_warmup_start``, then
    ``vdl_sentence * min(1, (t - start) / (end - start))``, ``vdl_sentence`` from ``end`` on,
    and always 0 before stage 3.
    """
    stage = curriculum_stage(t, cfg)
    bi = cfg.vdl_bigram if stage == 2 or (stage == 3 and cfg.vdl_bigram_in_stage3) else 0.0
    if stage < 3 or t < cfg.vdl_sentence_warmup_start:
        return bi, 0.0
    span = cfg.vdl_sentence_warmup_end - cfg.vdl_sentence_warmup_start
    frac = 1.0 if span <= 0 else min(1.0, (t - cfg.vdl_sentence_warmup_start) / span)
    return bi, cfg.vdl_sentence * frac


@dataclass(frozen=True)
class StreamPlan:
    """Micro-batches per stream in one iteration (0 = stream inactive) and their batch sizes."""

    micro_batches: dict[str, int]
    batch_sizes: dict[str, int]

    @property
    def active(self) -> tuple[str, ...]:
        return tuple(s for s in STREAMS if self.micro_batches[s] > 0)


def stream_plan(t: int, cfg: TrainConfig) -> StreamPlan:
    """Streams sampled at iteration ``t``: a stream is active when its stage weight is > 0;
    char and bigram take one micro-batch, the sentence stream ``sentence_accum``."""
    w = stage_weights(t, cfg)
    counts = {
        "char": 1 if w.char > 0 else 0,
        "bigram": 1 if w.bigram > 0 else 0,
        "sentence": cfg.sentence_accum if w.sentence > 0 else 0,
    }
    sizes = {"char": cfg.batch_char, "bigram": cfg.batch_bigram, "sentence": cfg.batch_sentence}
    return StreamPlan(counts, sizes)


def check_schedule(cfg: TrainConfig) -> None:
    """Raise ``ValueError`` on an inconsistent schedule (boundaries out of order, sizes < 1)."""
    if not 0 <= cfg.stage2_start <= cfg.stage3_start:
        raise ValueError(f"train: need 0 <= stage2_start ({cfg.stage2_start}) <= stage3_start "
                         f"({cfg.stage3_start})")
    if cfg.total_iters < 1:
        raise ValueError("train: total_iters must be >= 1")
    if not 0.0 <= cfg.lr_decay_final <= 1.0:
        raise ValueError(f"train: lr_decay_final must be in [0, 1], got {cfg.lr_decay_final}")
    if cfg.vdl_sentence_warmup_end < cfg.vdl_sentence_warmup_start:
        raise ValueError("train: vdl_sentence_warmup_end < vdl_sentence_warmup_start")
    for name in ("batch_char", "batch_bigram", "batch_sentence", "sentence_accum"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"train: {name} must be >= 1")
    if cfg.stage1.char <= 0 and cfg.stage1.bigram <= 0 and cfg.stage1.sentence <= 0:
        raise ValueError("train: stage 1 has no active stream")


# the TrainConfig fields counted in iterations (but the logging cadence): a schedule scaled
# by a factor scales them all, so the curriculum keeps its shape (stage shares, warm-ups, VDL
# ramp, decay) and its evaluations and checkpoints their number
ITERATION_FIELDS = ("total_iters", "stage2_start", "stage3_start", "warmup_iters",
                    "stage_warmup_iters", "vdl_sentence_warmup_start",
                    "vdl_sentence_warmup_end", "lr_decay_start", "lr_decay_end", "ema_start",
                    "eval_interval", "checkpoint_interval")


def stage_iterations(cfg: TrainConfig) -> tuple[int, int, int]:
    """Iterations of stages 1, 2 and 3 in a run of ``total_iters``."""
    s2 = min(cfg.stage2_start, cfg.total_iters)
    s3 = min(max(cfg.stage3_start, s2), cfg.total_iters)
    return s2, s3 - s2, cfg.total_iters - s3


def projected_seconds(cfg: TrainConfig, seconds_per_iter: tuple[float, float, float]) -> float:
    """Seconds the steps of the whole schedule take at ``seconds_per_iter`` per stage."""
    return sum(n * s for n, s in zip(stage_iterations(cfg), seconds_per_iter))


def scaled_schedule(cfg: TrainConfig, factor: float) -> dict[str, int]:
    """Every :data:`ITERATION_FIELDS` value times ``factor`` (rounded; a positive value stays
    at least 1), as ``train`` overrides: the same curriculum, shorter or longer."""
    if factor <= 0:
        raise ValueError(f"schedule factor must be > 0, got {factor}")
    return {name: (max(1, round(getattr(cfg, name) * factor)) if getattr(cfg, name) > 0 else 0)
            for name in ITERATION_FIELDS}


def fit_schedule(cfg: TrainConfig, seconds_per_iter: tuple[float, float, float],
                 budget: float, lengthen: bool = True) -> float:
    """The factor that makes the schedule's steps fill ``budget`` seconds at the measured
    ``seconds_per_iter`` of stages 1, 2, 3 (:func:`scaled_schedule`): below 1 when they would
    run late, above 1 when the step is fast enough for more (``lengthen``; off: at most 1)."""
    need = projected_seconds(cfg, seconds_per_iter)
    if budget <= 0:
        raise ValueError(f"the time budget must be > 0 seconds, got {budget}")
    factor = budget / need
    return min(1.0, factor) if not lengthen else factor


# the ITERATION_FIELDS that are a moment of the run (the rest are lengths: warm-ups, intervals)
_MOMENTS = ("total_iters", "stage2_start", "stage3_start", "vdl_sentence_warmup_start",
            "vdl_sentence_warmup_end", "lr_decay_start", "lr_decay_end", "ema_start")


def fitted_schedule(cfg: TrainConfig, seconds_per_iter: tuple[float, float, float],
                    budget: float, stage1_floor: int = 0,
                    lengthen: bool = True) -> dict[str, int]:
    """``train`` overrides whose steps fill ``budget`` seconds at ``seconds_per_iter``: every
    stage scaled by :func:`fit_schedule`'s factor (the curriculum keeps its shape), except
    that stage 1 keeps at least ``stage1_floor`` iterations (as many as the budget can pay
    for; the glyph stage is where capitals and digits are learned, and where the letters
    first appear) and stages 2 and 3 share what is left, in their own proportions. Moments of
    the run (stage starts, the VDL ramp, the decay, the average's start) move with the stage
    they fall in; stage 1's warm-up scales with stage 1, the stage warm-ups with stages 2-3,
    the evaluation and checkpoint intervals with the whole run."""
    factor = fit_schedule(cfg, seconds_per_iter, budget, lengthen)
    n1, n2, n3 = stage_iterations(cfg)
    r1, r2, r3 = seconds_per_iter
    scaled = round(n1 * factor)
    affordable = int(budget / r1) if r1 > 0 else stage1_floor
    s1 = max(scaled, min(stage1_floor, affordable))
    if s1 == scaled or n1 == 0:
        return scaled_schedule(cfg, factor)
    f1 = s1 / n1
    rest = n2 * r2 + n3 * r3
    f23 = max(0.0, budget - s1 * r1) / rest if rest > 0 else factor
    start = cfg.stage2_start

    def moment(x: int) -> int:
        return round(x * f1) if x <= start else round(start * f1 + (x - start) * f23)

    out = {}
    total = moment(cfg.total_iters)
    for name in ITERATION_FIELDS:
        value = getattr(cfg, name)
        if value <= 0:
            out[name] = 0
        elif name in _MOMENTS:
            out[name] = max(1, moment(value))
        elif name == "warmup_iters":
            out[name] = max(1, round(value * f1))
        elif name == "stage_warmup_iters":
            out[name] = max(1, round(value * f23))
        else:
            out[name] = max(1, round(value * total / max(cfg.total_iters, 1)))
    return out
