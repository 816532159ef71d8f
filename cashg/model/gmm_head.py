"""Output head: a K-component bivariate Gaussian mixture over (dx, dy) and 4 pen-state logits.

Parameterisation (paper Sec. 3.2 and appendix C.4): ``pi`` by softmax (kept as log-weights),
``sigma = softplus(.) + eps``, ``rho = tanh(.)`` applied **once** and clamped to
``+-(1 - 1e-5)`` (the authors' code applies tanh twice, which caps |rho| near 0.76).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

N_PEN = 4
RHO_LIMIT = 1.0 - 1e-5


@dataclass
class MixtureParams:
    """Mixture parameters for a batch of steps ``(...)``.

    log_pi (..., K) normalised log mixture weights; mu (..., K, 2); sigma (..., K, 2) > 0;
    rho (..., K) in [-(1-1e-5), 1-1e-5]; pen_logits (..., 4) for PM, PU, CURSIVE_EOC, EOC.
    """

    log_pi: torch.Tensor
    mu: torch.Tensor
    sigma: torch.Tensor
    rho: torch.Tensor
    pen_logits: torch.Tensor

    def rows(self, rows: torch.Tensor, lead: int) -> MixtureParams:
        """The parameters at ``rows`` (N,) of the flattened ``lead`` leading dimensions: what
        indexing with the boolean mask whose True entries those rows are would select
        (:func:`cashg.losses.flat_rows`), without a data-dependent shape (a compiled step)."""
        return MixtureParams(*(x.reshape(-1, *x.shape[lead:]).index_select(0, rows) for x in
                               (self.log_pi, self.mu, self.sigma, self.rho, self.pen_logits)))


def mixture_from_raw(raw: torch.Tensor, n_mixtures: int, sigma_eps: float) -> MixtureParams:
    """Split raw head outputs (..., 4 + 6K) into valid :class:`MixtureParams`."""
    k = n_mixtures
    if raw.shape[-1] != N_PEN + 6 * k:
        raise ValueError(f"expected {N_PEN + 6 * k} raw outputs, got {raw.shape[-1]}")
    pen_logits = raw[..., :N_PEN]
    pi_logits, mx, my, sx, sy, r = raw[..., N_PEN:].split(k, dim=-1)
    return MixtureParams(
        log_pi=F.log_softmax(pi_logits, dim=-1),
        mu=torch.stack([mx, my], dim=-1),
        sigma=torch.stack([F.softplus(sx), F.softplus(sy)], dim=-1) + sigma_eps,
        rho=torch.tanh(r).clamp(-RHO_LIMIT, RHO_LIMIT),
        pen_logits=pen_logits,
    )


class GMMHead(nn.Module):
    """``f_out``: decoder state (..., D) -> :class:`MixtureParams`, one linear projection
    ``proj`` to the raw layout of :func:`mixture_from_raw`."""

    def __init__(self, d_model: int, n_mixtures: int = 20, sigma_eps: float = 1e-4):
        super().__init__()
        self.n_mixtures = n_mixtures
        self.sigma_eps = sigma_eps
        self.proj = nn.Linear(d_model, N_PEN + 6 * n_mixtures)

    def forward(self, h: torch.Tensor) -> MixtureParams:
        return mixture_from_raw(self.proj(h), self.n_mixtures, self.sigma_eps)
