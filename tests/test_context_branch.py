"""The context branch of the decoder and the gate of Eq. 1 (paper Sec. 3.1, 3.3, app. C.2).

The gate is forced both ways (f_gate's weights zero, its bias +-40: g = 1 or g = 0 to float
precision) and the text encoder's context memory is shifted at one character:
- closed (g = 0): h = h_sty, the output never changes with the context memory;
- open (g = 1): h = h_ctx, the output changes with the context memory, only in the windows
  that read the shifted vector (``character``: that character's window; ``sentence``: every
  window of the sentence), and it still depends on the window's trajectory tokens, because the
  branch is a decoder over them (the earlier reading, Eq. 1 on the raw vector, gave every token
  of a character the same output m_ctx_s: ``context_layers: 0``, checked as such).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from cashg.model import CASHG, collate
from cashg.model.presets import TINY, synthetic_sample, with_changes

TEXTS = ["ab ba", "cab"]


class _ShiftedContext(nn.Module):
    """The text encoder with its context memory shifted by ``shift`` (B, S, D)."""

    def __init__(self, text: nn.Module, shift: torch.Tensor):
        super().__init__()
        self.text, self.shift = text, shift

    def index_plan(self, codepoints, char_mask, unique_size=None):
        return self.text.index_plan(codepoints, char_mask, unique_size)

    def with_states(self, plan, codepoints, char_mask, device):
        return self.text.with_states(plan, codepoints, char_mask, device)

    def forward(self, codepoints, char_mask, plan=None):
        identity, ctx = self.text(codepoints, char_mask, plan)
        return identity, ctx + self.shift


def _batch():
    rng = np.random.default_rng(0)
    return collate([synthetic_sample(t, i, rng) for i, t in enumerate(TEXTS)])


def _model(gate_bias: float, **changes) -> CASHG:
    torch.manual_seed(0)
    m = CASHG(with_changes(TINY, **changes)).eval()
    with torch.no_grad():
        m.decoder.fusion.f_gate.weight.zero_()
        m.decoder.fusion.f_gate.bias.fill_(gate_bias)
    return m


def _mu(model: CASHG, batch, shift_at: tuple[int, int] | None = None) -> torch.Tensor:
    """Mixture means (B, S, T, K, 2), the context memory shifted at (sample, character)."""
    text = model.text
    if shift_at is not None:
        b, s = batch.codepoints.shape
        shift = torch.zeros(b, s, TINY.d_model)
        shift[shift_at] = 3.0 * torch.randn(TINY.d_model, generator=torch.Generator().manual_seed(5))
        model.text = _ShiftedContext(text, shift)
    try:
        with torch.no_grad():
            return model(batch).params.mu
    finally:
        model.text = text


@pytest.mark.parametrize("memory", ["character", "sentence"])
def test_closed_gate_ignores_the_context_memory(memory):
    m, batch = _model(-40.0, context_memory=memory), _batch()
    torch.testing.assert_close(_mu(m, batch, (0, 1)), _mu(m, batch), rtol=0, atol=1e-6)


@pytest.mark.parametrize("memory", ["character", "sentence"])
def test_open_gate_follows_the_context_memory(memory):
    m, batch = _model(40.0, context_memory=memory), _batch()
    base, shifted = _mu(m, batch), _mu(m, batch, (0, 1))
    valid = batch.point_mask
    changed = ((shifted - base).abs().amax((-1, -2)) > 1e-4) & valid  # (B, S, T)
    assert bool(changed[0, 1][valid[0, 1]].all())  # the shifted character's own window
    torch.testing.assert_close(shifted[1], base[1])  # another sentence: never
    others = changed[0, [0, 2, 3, 4]]
    if memory == "character":  # each window reads its own character's vector only
        assert not bool(others.any())
    else:  # every window of the sentence attends to the whole sentence's memory
        assert bool(others[valid[0, [0, 2, 3, 4]]].all())


def test_open_gate_output_still_depends_on_the_window_tokens():
    """The context branch decodes the window: with g = 1 the predictions along a character
    differ from point to point. Eq. 1 on the raw context vector (``context_layers: 0``, the
    project's earlier reading) gives every token of a character the same h = m_ctx_s."""
    batch = _batch()
    n = int(batch.point_mask[0, 1].sum())
    mu = _mu(_model(40.0), batch)[0, 1, :n]  # (T, K, 2)
    assert float((mu - mu[:1]).abs().max()) > 1e-3
    raw = _mu(_model(40.0, context_layers=0), batch)[0, 1, :n]
    torch.testing.assert_close(raw, raw[:1].expand_as(raw))


def test_branch_exists_only_with_gated_fusion():
    names = {n.split(".")[1] for n, _ in CASHG(TINY).decoder.named_parameters()
             if n.startswith("context_blocks")}
    assert names == {"0"}  # context_layers 1, as in the authors' code
    off = CASHG(with_changes(TINY, gated_fusion=False)).decoder
    assert len(off.context_blocks) == 0 and off.fusion is None and off.ln_ctx is None
    # a single key has no query: no parameter that could never get a gradient
    blk = CASHG(TINY).decoder.context_blocks[0]
    assert blk.cross_attn.q is None and blk.ln2 is None
    with pytest.raises(ValueError, match="context_memory"):
        with_changes(TINY, context_memory="paragraph")
