"""Typed config of the ``model`` section of ``params.yaml``: the network as built (paper Sec. 3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


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
