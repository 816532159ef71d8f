"""Attention of ONE query per (window, head) over that window's own number of cached keys, the
inner loop of :meth:`cashg.model.decoder.BiSWTDecoder.step`.

At one query per head the work is a matrix-vector product per (window, head) and the cost is
reading the keys and values (memory bound): SDPA's CPU kernel and batched ``bmm`` spend several
times that on per-matrix overhead, and both read every window up to the longest one. On the CPU
(float32) two numba kernels read each window's keys only up to its own length, contiguously:
scores, then (after a torch softmax, vectorised) the weighted sum of the values. Elsewhere (GPU)
the same result comes from two batched products with an additive mask.
"""

from __future__ import annotations

import numba
import numpy as np
import torch


@numba.njit(cache=True, nogil=True, fastmath=True, boundscheck=False)
def _scores(q: np.ndarray, k: np.ndarray, n_keys: np.ndarray, heads: int, scale: float,
            out: np.ndarray) -> None:
    """out[r, j] = scale * q[r] . k[r, j] for j < n_keys[r // heads], -inf after.
    q (R, dh); k (R, cap, dh); n_keys (W,); out (R, L) with L >= max(n_keys)."""
    dh = q.shape[1]
    for r in range(q.shape[0]):
        n = n_keys[r // heads]
        qr, kr, o = q[r], k[r], out[r]
        for j in range(n):
            kj = kr[j]
            acc = np.float32(0.0)
            for c in range(dh):
                acc += qr[c] * kj[c]
            o[j] = acc * scale
        for j in range(n, out.shape[1]):
            o[j] = -np.inf


@numba.njit(cache=True, nogil=True, fastmath=True, boundscheck=False)
def _weighted_values(p: np.ndarray, v: np.ndarray, n_keys: np.ndarray, heads: int,
                     out: np.ndarray) -> None:
    """out[r] = sum_{j < n_keys[r // heads]} p[r, j] * v[r, j].
    p (R, L); v (R, cap, dh); out (R, dh)."""
    dh = out.shape[1]
    for r in range(p.shape[0]):
        n = n_keys[r // heads]
        pr, vr, o = p[r], v[r], out[r]
        for c in range(dh):
            o[c] = 0.0
        for j in range(n):
            pj, vj = pr[j], vr[j]
            for c in range(dh):
                o[c] += pj * vj[c]


def attend_one_query(
    q: torch.Tensor,  # (W, h, dh)
    k: torch.Tensor,  # (W, h, cap, dh) contiguous (a KV cache or a memory's keys)
    v: torch.Tensor,  # (W, h, cap, dh) contiguous
    n_keys: torch.Tensor | None = None,  # (W,) long in [1, cap]; None: all cap keys
    use_kernels: bool | None = None,  # None: the numba kernels on the CPU (float32)
) -> torch.Tensor:
    """Softmax attention (scale ``dh ** -0.5``) of each window's query to its keys
    ``[0, n_keys[w])``; returns (W, h, dh)."""
    w, h, dh = q.shape
    cap = k.shape[2]
    if use_kernels is None:
        use_kernels = q.device.type == "cpu" and q.dtype == torch.float32
    if n_keys is None:
        n_keys = torch.full((w,), cap, dtype=torch.long, device=q.device)
        n_max = cap
    else:
        n_max = int(n_keys.max())
    qf = q.reshape(w * h, dh)
    kf, vf = k.view(w * h, cap, dh), v.view(w * h, cap, dh)
    if use_kernels:
        s = q.new_empty(w * h, n_max)
        n_np = n_keys.numpy()
        _scores(qf.contiguous().numpy(), kf.numpy(), n_np, h, dh ** -0.5, s.numpy())
        out = q.new_empty(w * h, dh)
        _weighted_values(torch.softmax(s, -1).numpy(), vf.numpy(), n_np, h, out.numpy())
        return out.view(w, h, dh)
    s = torch.bmm(qf[:, None], kf[:, :n_max].transpose(1, 2)).mul_(dh ** -0.5)  # (W*h, 1, L)
    if n_max > int(n_keys.min()):
        after = torch.arange(n_max, device=q.device) >= n_keys[:, None]  # (W, L)
        s = s.masked_fill(after.repeat_interleave(h, 0)[:, None], float("-inf"))
    return torch.bmm(torch.softmax(s, -1), vf[:, :n_max]).view(w, h, dh)
