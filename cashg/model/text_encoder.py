"""Character Context Encoder (paper Sec. 3.1, appendix C.1).

Two outputs from one frozen character-level text backbone ``f_text`` (CANINE):

- Character-Identity Embedding: each unique code point ``u`` of the batch is encoded ALONE
  (``[CLS] u [SEP]``, so no context leaks in), mean-pooled over its tokens and projected
  (``f_id``), then augmented as ``e~(u) = e(u) + alpha * P phi(u)``. ``phi`` is a learnable
  table indexed by ``u mod code_table_size`` (a hash: code points that collide share a row;
  with the default 8192 rows all of Latin, Greek and Cyrillic are collision-free, while CJK
  code points share rows pairwise and stay separated by the CANINE part). ``alpha`` is kept
  positive as ``softplus(raw)``, initialised to ``alpha_init``.
- Context memory: the whole sentence is encoded, ``H = W_h f_text(u)``, passed through a light
  Transformer encoder and a projection head ``f_ctx``: one vector per character.

The backbone comes from ``CanineModel.from_pretrained`` (hub id or local directory). The value
``"random-canine"`` builds a randomly initialised CANINE of configurable size instead; that
choice is logged. A failing ``from_pretrained`` raises and names the offline option; nothing is
substituted silently.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from transformers import CanineConfig, CanineModel

from cashg.core.config.model import ModelConfig
from cashg.model.device import host_to, host_to_all
from cashg.model.frozen_cache import RowCache, TextStates

log = logging.getLogger(__name__)

RANDOM_CANINE = "random-canine"
CLS_CODEPOINT = 0xE000  # CANINE's [CLS] (private use area)
SEP_CODEPOINT = 0xE001  # CANINE's [SEP]
PAD_CODEPOINT = 0
CACHED_TEXT_CHARS = 2  # a frozen backbone's states of texts up to this length are kept


class TextBackboneError(RuntimeError):
    """The text backbone could not be loaded."""


def random_canine_config(cfg: ModelConfig) -> CanineConfig:
    """A CANINE configuration of the sizes in ``cfg`` (canine-c's by default)."""
    return CanineConfig(
        hidden_size=cfg.canine_hidden,
        num_hidden_layers=cfg.canine_layers,
        num_attention_heads=cfg.canine_heads,
        intermediate_size=cfg.canine_intermediate,
        num_hash_buckets=cfg.canine_hash_buckets,
    )


def build_text_backbone(cfg: ModelConfig, backbone_config: dict | None = None) -> CanineModel:
    """The CANINE backbone named by ``cfg.text_backbone``.

    ``backbone_config`` (a ``CanineConfig.to_dict()``) builds that architecture with random
    weights and no download; :func:`cashg.model.checkpoint.load_model` uses it, then loads the
    checkpoint's weights.
    """
    if backbone_config is not None:
        return CanineModel(CanineConfig.from_dict(backbone_config))
    if cfg.text_backbone == RANDOM_CANINE:
        log.warning(
            "text backbone: building a RANDOMLY INITIALISED CANINE (hidden %d, %d layers, "
            "%d heads, seed %d) because model.text_backbone is %r; this is the offline demo "
            "setting, not the paper's pretrained google/canine-c",
            cfg.canine_hidden, cfg.canine_layers, cfg.canine_heads, cfg.canine_seed, RANDOM_CANINE,
        )
        with torch.random.fork_rng(devices=[]):  # seeded, without touching the global RNG
            torch.manual_seed(cfg.canine_seed)
            return CanineModel(random_canine_config(cfg))
    try:
        model = CanineModel.from_pretrained(cfg.text_backbone)
    except Exception as exc:  # any loader failure: report it with the offline alternative
        raise TextBackboneError(
            f"could not load the text backbone {cfg.text_backbone!r} with "
            f"CanineModel.from_pretrained ({type(exc).__name__}: {exc}). Give a hub id that is "
            f"reachable or cached, or a local directory holding the model; for an offline run "
            f"without pretrained weights set model.text_backbone: {RANDOM_CANINE} in params.yaml "
            f"(a randomly initialised CANINE of the model.canine_* sizes)."
        ) from exc
    log.info("text backbone: loaded %s with from_pretrained", cfg.text_backbone)
    return model


def _pad_to_multiple(ids: torch.Tensor, mask: torch.Tensor, multiple: int):
    """Right-pad (N, L) ids/mask so L is a positive multiple of CANINE's downsampling rate."""
    length = max(multiple, math.ceil(ids.shape[1] / multiple) * multiple)
    extra = length - ids.shape[1]
    if extra:
        ids = nn.functional.pad(ids, (0, extra), value=PAD_CODEPOINT)
        mask = nn.functional.pad(mask, (0, extra), value=False)
    return ids, mask


@dataclass(frozen=True)
class TextPlan:
    """A frozen backbone's states of a batch, computed before the forward
    (:mod:`cashg.model.plan`): ``unique`` (U,) the batch's code points, ``rows`` (K,) the
    flat (B*S) position of each valid character, ``inverse`` (K,) its code point's index in
    ``unique``, ``identity_states`` (U, Hb) each code point's states encoded alone,
    ``char_states`` (B, S, Hb) each sentence's (None when the context path is off). An
    index plan (:meth:`CharacterContextEncoder.index_plan`, built on the host) has no states
    yet: both None until :meth:`CharacterContextEncoder.with_states`."""

    unique: torch.Tensor
    rows: torch.Tensor
    inverse: torch.Tensor
    identity_states: torch.Tensor
    char_states: torch.Tensor | None
    # (K,) float: 1 at a valid character, 0 at padding (a static-shape plan's ``rows`` are
    # every (B*S) position, so that K is B*S; the padding's identities are multiplied by 0)
    valid: torch.Tensor | None = None


class CharacterContextEncoder(nn.Module):
    """Identity embeddings ``e~(u)`` and context memory ``M_ctx`` for code point sequences."""

    def __init__(self, cfg: ModelConfig, backbone_config: dict | None = None):
        super().__init__()
        self.backbone = build_text_backbone(cfg, backbone_config)
        self.frozen = cfg.freeze_text_backbone
        if self.frozen:
            self.backbone.requires_grad_(False)
            self.backbone.eval()
        hb, d = self.backbone.config.hidden_size, cfg.d_model
        self.rate = int(self.backbone.config.downsampling_rate)
        self.f_id = nn.Sequential(nn.Linear(hb, d), nn.LayerNorm(d))
        self.code_table_size = cfg.code_table_size
        self.phi = nn.Embedding(cfg.code_table_size, cfg.code_dim)
        self.P = nn.Linear(cfg.code_dim, d, bias=False)
        self.alpha_raw = nn.Parameter(torch.tensor(math.log(math.expm1(cfg.alpha_init))))
        self.W_h = nn.Linear(hb, d)
        layer = nn.TransformerEncoderLayer(
            d, cfg.n_heads, cfg.ffn_dim, cfg.dropout, batch_first=True, norm_first=True
        )
        self.ctx_encoder = nn.TransformerEncoder(layer, cfg.ctx_layers, enable_nested_tensor=False)
        self.f_ctx = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d), nn.GELU(), nn.Linear(d, d))
        # without the gated fusion (ablation) nothing reads M_ctx: the context path is frozen
        # (no optimizer ever updates it) and not computed (forward gives zeros)
        self.context_used = cfg.gated_fusion
        if not self.context_used:
            for m in (self.W_h, self.ctx_encoder, self.f_ctx):
                m.requires_grad_(False)

    def train(self, mode: bool = True) -> CharacterContextEncoder:
        super().train(mode)
        if self.frozen:
            self.backbone.eval()  # a frozen backbone never runs dropout
        return self

    @property
    def alpha(self) -> torch.Tensor:
        """The positive scale of the code embedding (alpha in R+)."""
        return nn.functional.softplus(self.alpha_raw)

    def _backbone(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """CANINE character-level states (N, L, Hb) for code points ids (N, L)."""
        n_in = ids.shape[1]
        ids, mask = _pad_to_multiple(ids, mask, self.rate)
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.frozen):
            out = self.backbone(input_ids=ids, attention_mask=mask.long())
        return out.last_hidden_state[:, :n_in]

    def _backbone_version(self) -> int:
        """Changes whenever a backbone weight is written in place (e.g. load_state_dict)."""
        return sum(p._version for p in self.backbone.parameters())

    def _caches(self) -> tuple[RowCache, RowCache, TextStates] | None:
        """The (code point, short text, sentence) caches of a frozen backbone, emptied when
        its weights changed since they were filled; None for a trained backbone (nothing to
        cache)."""
        if not self.frozen:
            return None
        version = self._backbone_version()
        if getattr(self, "_cache_version", None) != version:
            self._cache_version = version
            self._cache_codes, self._cache_texts = RowCache(), RowCache()
            self._cache_sentences = TextStates()
        return self._cache_codes, self._cache_texts, self._cache_sentences

    def _encode_alone(self, codes: list[int], device: torch.device) -> torch.Tensor:
        """(n + 2, Hb) backbone states of ``[CLS] codes [SEP]`` encoded as a batch of one (the
        cached values: independent of any other text)."""
        ids = host_to(torch.tensor([[CLS_CODEPOINT, *codes, SEP_CODEPOINT]]), device)
        return self._backbone(ids, torch.ones_like(ids, dtype=torch.bool))[0]

    def identity_states(self, unique: torch.Tensor,
                        device: torch.device | None = None) -> torch.Tensor:
        """(U, Hb) mean-pooled backbone states of each code point of ``unique`` (U,) encoded
        alone (``[CLS] u [SEP]``), on ``device`` (default: ``unique``'s). A frozen
        backbone's come from the cache, keyed by ``unique``'s values: a host ``unique``
        reads them without a host synchronisation (:meth:`with_states`)."""
        device = unique.device if device is None else torch.device(device)
        caches = self._caches()
        if caches is not None:
            return caches[0].rows(unique.tolist(),
                                  lambda code: self._encode_alone([code], device).mean(0))
        unique = host_to(unique, device)
        ids = torch.stack(
            [torch.full_like(unique, CLS_CODEPOINT), unique, torch.full_like(unique, SEP_CODEPOINT)],
            dim=1,
        )  # (U, 3)
        return self._backbone(ids, torch.ones_like(ids, dtype=torch.bool)).mean(dim=1)

    def prefill(self, texts: Sequence[str], device: torch.device | str,
                chunk: int = 256) -> None:
        """A frozen backbone's caches filled with the states of ``texts``: each code point,
        and (where the context path reads them) each text of at most
        ``CACHED_TEXT_CHARS`` characters, and on a GPU each longer one. The same values a
        batch computes on its first sight of them (each key is encoded alone,
        :mod:`cashg.model.frozen_cache`), computed before a training's loop instead of inside
        its first steps. Nothing for a trained backbone."""
        if self._caches() is None or not texts:
            return
        device = torch.device(device)
        codes = sorted({ord(c) for text in texts for c in text})
        self.identity_states(torch.tensor(codes), device)
        if not self.context_used:
            return
        kept = [t for t in texts if t and (len(t) <= CACHED_TEXT_CHARS or device.type == "cuda")]
        for start in range(0, len(kept), chunk):
            part = kept[start:start + chunk]
            width = max(len(t) for t in part)
            codepoints = torch.zeros((len(part), width), dtype=torch.long)
            for i, text in enumerate(part):
                codepoints[i, :len(text)] = torch.tensor([ord(c) for c in text])
            self.char_states(codepoints, codepoints > 0, device)

    def plan(self, codepoints: torch.Tensor, char_mask: torch.Tensor,
             unique_size: int | None = None) -> TextPlan | None:
        """The frozen backbone's states of a batch (:class:`TextPlan`), for a forward without
        look-ups (:mod:`cashg.model.plan`); None for a trained backbone, whose states must be
        computed inside the forward (they need gradients). ``unique_size``: a static-shape
        plan, its code points padded to that many (repeating the last) and its rows every
        position of the batch (the padding's identity multiplied by 0: the same values).
        :meth:`index_plan` then :meth:`with_states`, on the batch's device."""
        plan = self.index_plan(codepoints, char_mask, unique_size)
        return None if plan is None else self.with_states(plan, codepoints, char_mask,
                                                          codepoints.device)

    def index_plan(self, codepoints: torch.Tensor, char_mask: torch.Tensor,
                   unique_size: int | None = None) -> TextPlan | None:
        """The index part of :meth:`plan` (``unique``, ``rows``, ``inverse``, ``valid``; no
        states), computed where the batch is: on the host for a training step, so that
        ``unique`` / ``nonzero`` cost no host synchronisation."""
        if not self.frozen:
            return None
        if unique_size is None:
            return TextPlan(*self._unique_codes(codepoints, char_mask), None, None)
        valid = char_mask.reshape(-1)
        unique, inverse = torch.unique(codepoints.reshape(-1)[valid], return_inverse=True)
        if len(unique) == 0 or len(unique) > unique_size:
            raise ValueError(f"a static text plan of {unique_size} code points for a batch of "
                             f"{len(unique)} distinct ones")
        unique = torch.cat([unique, unique[-1:].expand(unique_size - len(unique))])
        every = torch.zeros_like(codepoints.reshape(-1))  # padding -> code point 0's row
        every[valid] = inverse
        return TextPlan(unique, torch.arange(len(every), device=every.device), every, None,
                        None, valid.to(torch.float32))

    def with_states(self, plan: TextPlan, codepoints: torch.Tensor, char_mask: torch.Tensor,
                    device: torch.device | str) -> TextPlan:
        """``plan`` (its index tensors already where the forward runs) with the frozen
        backbone's states on ``device``: each code point's, and each text's when the
        context path is used. ``codepoints`` / ``char_mask`` (B, S) and ``plan.unique``
        are read for the cache's keys: host tensors cost no synchronisation."""
        states = (self.identity_states(plan.unique, device) if len(plan.unique) else
                  self.f_id[0].weight.new_zeros(0, self.backbone.config.hidden_size))
        chars = self.char_states(codepoints, char_mask, device) if self.context_used else None
        return TextPlan(plan.unique, plan.rows, plan.inverse, states, chars, plan.valid)

    @staticmethod
    def _unique_codes(codepoints: torch.Tensor, char_mask: torch.Tensor):
        """(unique (U,), rows (K,), inverse (K,)) of the valid characters (see TextPlan)."""
        unique, inverse = torch.unique(codepoints[char_mask], return_inverse=True)
        return unique, char_mask.reshape(-1).nonzero().squeeze(1), inverse

    def identity(self, codepoints: torch.Tensor, char_mask: torch.Tensor,
                 plan: TextPlan | None = None) -> torch.Tensor:
        """Augmented identity embeddings (B, S, D); zeros where ``char_mask`` (B, S) is False.

        Each unique code point of the batch is encoded once, alone (a frozen backbone's
        states are kept for the whole run, :mod:`cashg.model.frozen_cache`; ``plan`` holds
        them already).
        """
        b, s = codepoints.shape
        d = self.P.out_features
        out = codepoints.new_zeros((b * s, d), dtype=self.P.weight.dtype)
        if plan is None:
            if not bool(char_mask.any()):
                return out.view(b, s, d)
            unique, rows, inverse = self._unique_codes(codepoints, char_mask)  # (U,) (K,) (K,)
            states = self.identity_states(unique)
        else:
            unique, rows, inverse, states = plan.unique, plan.rows, plan.inverse, \
                plan.identity_states
        e_id = self.f_id(states)  # (U, D)
        code = self.P(self.phi(unique % self.code_table_size))  # (U, D)
        e_tilde = e_id + self.alpha * code
        values = e_tilde[inverse]  # (K, D)
        if plan is not None and plan.valid is not None:
            values = values * plan.valid[:, None].to(values.dtype)
        return out.index_put((rows,), values.to(out.dtype)).view(b, s, d)

    def char_states(self, codepoints: torch.Tensor, char_mask: torch.Tensor,
                    device: torch.device | str | None = None) -> torch.Tensor:
        """(B, S, Hb) backbone states of each sentence's characters (``[CLS] text [SEP]``,
        the markers dropped), on ``device`` (default: the batch's). A frozen backbone's
        states of the texts of at most ``CACHED_TEXT_CHARS`` characters (the char and
        bigram streams) come from the cache, the longer texts from
        :meth:`_long_text_states`. The lengths and cache keys are read from ``codepoints`` /
        ``char_mask``: host tensors cost no synchronisation."""
        device = codepoints.device if device is None else torch.device(device)
        lengths = char_mask.sum(1).tolist()
        caches = self._caches()
        if caches is None:
            return self._batched_char_states(codepoints, char_mask, lengths, device)
        b, s = codepoints.shape
        short = [i for i, n in enumerate(lengths) if n <= CACHED_TEXT_CHARS]
        sentences = caches[2] if device.type == "cuda" else None  # see _long_text_states
        if not short:
            return self._long_text_states(codepoints, char_mask, lengths, device, sentences)
        codes = codepoints.tolist()

        def one(text: tuple) -> torch.Tensor:
            states = self._encode_alone(list(text), device)[1:-1]  # markers dropped
            return nn.functional.pad(states, (0, 0, 0, CACHED_TEXT_CHARS - len(text)))

        cached = caches[1].rows([tuple(codes[i][:lengths[i]]) for i in short], one)  # (K, 2, Hb)
        cached = nn.functional.pad(cached, (0, 0, 0, max(0, s - CACHED_TEXT_CHARS)))[:, :s]
        if len(short) == b:
            return cached
        long = [i for i in range(b) if lengths[i] > CACHED_TEXT_CHARS]
        rows = torch.tensor(long, device=codepoints.device)
        out = cached.new_zeros((b, s, cached.shape[-1]))
        out[host_to(torch.tensor(short), device)] = cached
        out[host_to(torch.tensor(long), device)] = self._long_text_states(
            codepoints[rows], char_mask[rows], [lengths[i] for i in long], device,
            sentences).to(out.dtype)
        return out

    def _long_text_states(self, codepoints: torch.Tensor, char_mask: torch.Tensor,
                          lengths: list[int], device: torch.device,
                          cache: TextStates | None) -> torch.Tensor:
        """(B, S, Hb) states of the longer texts (the sentences). With a ``cache`` (a frozen
        backbone on a GPU) each text is encoded alone on its first sight and kept: the
        backbone (transformers' CANINE builds its attention masks with a host read of
        ``mask.all()`` and a pageable scalar copy, each a host synchronisation, seen on an
        H200) then runs only for texts not seen before, and a replayed training step makes
        no synchronisation. Without one (a CPU) they are encoded together every time, as
        before (the same values up to rounding; the CPU step stays bit for bit)."""
        if cache is None:
            return self._batched_char_states(codepoints, char_mask, lengths, device)
        codes = codepoints.tolist()
        texts = [tuple(codes[i][:n]) for i, n in enumerate(lengths)]
        states = cache.rows(texts, lambda text: self._encode_alone(list(text), device)[1:-1])
        padded = nn.utils.rnn.pad_sequence(states, batch_first=True)  # (B, max n, Hb)
        return nn.functional.pad(padded, (0, 0, 0, codepoints.shape[1] - padded.shape[1]))

    def _batched_char_states(self, codepoints: torch.Tensor, char_mask: torch.Tensor,
                             lengths: list[int], device: torch.device) -> torch.Tensor:
        """(B, S, Hb) states of texts of any length (``lengths`` their characters), each
        encoded with the padding it would get alone, on ``device``. CANINE's states near a
        text's end depend on how far the padding goes beyond its last molecule (the
        molecule after it enters the final convolution): one sentence padded to its batch's
        longest got other context vectors than alone (up to 2.8 in the demo model). So
        texts are encoded in groups of equal padded length."""
        padded = [-(-(n + 2) // self.rate) * self.rate for n in lengths]
        b, s = codepoints.shape
        if len(set(padded)) == 1:
            width = max(lengths)
            states = self._encode_texts(codepoints[:, :width], char_mask[:, :width], device)
            return nn.functional.pad(states, (0, 0, 0, s - width))
        out = None
        for size in sorted(set(padded)):
            rows = [i for i, p in enumerate(padded) if p == size]
            width = max(lengths[i] for i in rows)
            idx = torch.tensor(rows)
            states = self._encode_texts(codepoints[idx, :width], char_mask[idx, :width], device)
            if out is None:
                out = states.new_zeros((b, s, states.shape[-1]))
            out[host_to(idx, device), :width] = states
        return out

    def _encode_texts(self, codepoints: torch.Tensor, char_mask: torch.Tensor,
                      device: torch.device) -> torch.Tensor:
        """(B, S, Hb) states of ``[CLS] text [SEP]`` for each row, the markers dropped, on
        ``device``. The ids are laid out where ``codepoints`` lives and copied once: from
        host tensors (the training step's) without a host synchronisation (an index write
        of a Python scalar into a GPU tensor copies the scalar from pageable memory)."""
        b = codepoints.shape[0]
        cls = torch.full((b, 1), CLS_CODEPOINT, dtype=codepoints.dtype, device=codepoints.device)
        lengths = char_mask.sum(dim=1)  # (B,)
        ids = torch.cat([cls, codepoints.masked_fill(~char_mask, PAD_CODEPOINT),
                         torch.zeros_like(cls)], dim=1)  # (B, S + 2)
        ids[torch.arange(b, device=ids.device), lengths + 1] = SEP_CODEPOINT
        mask = torch.cat([torch.ones_like(cls, dtype=torch.bool), char_mask,
                          torch.zeros_like(cls, dtype=torch.bool)], dim=1)
        mask[torch.arange(b, device=ids.device), lengths + 1] = True
        ids, mask = host_to_all([ids, mask], device)
        return self._backbone(ids, mask)[:, 1:-1]

    def context(self, codepoints: torch.Tensor, char_mask: torch.Tensor,
                states: torch.Tensor | None = None) -> torch.Tensor:
        """Context memory M_ctx (B, S, D), one vector per character of each sentence;
        ``states``: the backbone's (B, S, Hb) when already computed (:class:`TextPlan`)."""
        if states is None:
            states = self.char_states(codepoints, char_mask)
        h = self.W_h(states)
        h = self.ctx_encoder(h, src_key_padding_mask=~char_mask)
        return self.f_ctx(h) * char_mask[..., None]

    def forward(self, codepoints: torch.Tensor, char_mask: torch.Tensor,
                plan: TextPlan | None = None):
        """(identity (B, S, D), context memory (B, S, D); zeros when nothing reads it);
        ``plan``: the batch's frozen states, computed beforehand (:meth:`plan`)."""
        identity = self.identity(codepoints, char_mask, plan)
        if not self.context_used:
            return identity, torch.zeros_like(identity)
        return identity, self.context(codepoints, char_mask,
                                      None if plan is None else plan.char_states)
