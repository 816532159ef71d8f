"""The attention inner loops of :meth:`cashg.model.decoder.BiSWTDecoder.step`: one query per
(window, head).

Self-attention (:func:`attend_one_query`): the work is a matrix-vector product per (window,
head) and the cost is reading the cached keys and values (memory bound): SDPA's CPU kernel and
batched ``bmm`` spend several times that on per-matrix overhead, and both read every window up
to the longest one. On the CPU (float32) two numba kernels read each window's keys only up to
its own length, contiguously (appending the step's new key/value in the same pass): scores, then
(after a torch softmax, vectorised) the weighted sum of the values. Elsewhere (GPU) the same
result comes from two batched products with a mask.
The cross-attention to the style memories uses the same function (every memory token is a
key); windows that share a memory (sentences of one writer) read the same key rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import torch


@numba.njit(cache=True, nogil=True, fastmath=True, boundscheck=False)
def _append_and_score(q: np.ndarray, k: np.ndarray, k_new: np.ndarray, append: bool,
                      n_keys: np.ndarray, source: np.ndarray, heads: int, scale: float,
                      out: np.ndarray) -> None:
    """Query r = (window w, head) reads key row kr = k[u * heads + head], u = source[w] (a
    memory shared by windows) or u = w when ``source`` is empty (the window's own cache row). With ``append``, first kr[n - 1] =
    k_new[r]; then out[r, j] = scale * q[r] . kr[j] for j < n, -inf after (n = n_keys[w]).
    q, k_new (W * h, dh); k (U * h, cap, dh); n_keys, source (W,); out (W * h, L) with
    L >= max(n_keys). Four keys per iteration: four independent dot products keep the FMA
    units busy (one at a time is latency bound)."""
    dh = q.shape[1]
    for r in range(q.shape[0]):
        w = r // heads
        n = n_keys[w]
        u = w if source.shape[0] == 0 else source[w]
        qr, kr, o = q[r], k[u * heads + r % heads], out[r]
        if append:
            for c in range(dh):
                kr[n - 1, c] = k_new[r, c]
        j = 0
        while j + 4 <= n:
            k0, k1, k2, k3 = kr[j], kr[j + 1], kr[j + 2], kr[j + 3]
            a0 = a1 = a2 = a3 = np.float32(0.0)
            for c in range(dh):
                a0 += qr[c] * k0[c]
                a1 += qr[c] * k1[c]
                a2 += qr[c] * k2[c]
                a3 += qr[c] * k3[c]
            o[j], o[j + 1], o[j + 2], o[j + 3] = a0 * scale, a1 * scale, a2 * scale, a3 * scale
            j += 4
        for i in range(j, n):
            a0 = np.float32(0.0)
            for c in range(dh):
                a0 += qr[c] * kr[i, c]
            o[i] = a0 * scale
        for j in range(n, out.shape[1]):
            o[j] = -np.inf


@numba.njit(cache=True, nogil=True, fastmath=True, boundscheck=False)
def _append_and_weigh(p: np.ndarray, v: np.ndarray, v_new: np.ndarray, append: bool,
                      n_keys: np.ndarray, source: np.ndarray, heads: int,
                      out: np.ndarray) -> None:
    """Rows as in :func:`_append_and_score`: with ``append``, first vr[n - 1] = v_new[r];
    then out[r] = sum_{j < n} p[r, j] vr[j]. p (W * h, L); v (U * h, cap, dh); v_new, out
    (W * h, dh). Even and odd keys go to two accumulators (two independent FMA chains)."""
    dh = out.shape[1]
    even = np.zeros(dh, np.float32)
    odd = np.zeros(dh, np.float32)
    for r in range(p.shape[0]):
        w = r // heads
        n = n_keys[w]
        u = w if source.shape[0] == 0 else source[w]
        pr, vr = p[r], v[u * heads + r % heads]
        if append:
            for c in range(dh):
                vr[n - 1, c] = v_new[r, c]
        even[:] = 0.0
        odd[:] = 0.0
        for j in range(0, n - 1, 2):
            p0, p1, v0, v1 = pr[j], pr[j + 1], vr[j], vr[j + 1]
            for c in range(dh):
                even[c] += p0 * v0[c]
                odd[c] += p1 * v1[c]
        if n % 2:
            p0, v0 = pr[n - 1], vr[n - 1]
            for c in range(dh):
                even[c] += p0 * v0[c]
        for c in range(dh):
            out[r, c] = even[c] + odd[c]


_OWN_ROWS = np.zeros(0, np.int64)  # kernels' ``source`` for "window w reads row w"


@dataclass(frozen=True)
class KeyCounts:
    """Which keys each window attends to, prepared once per decoder step for every
    :func:`attend_one_query` of that step (all blocks): the first ``n[w]`` keys of key row
    ``source[w]`` (the window's own row when ``source`` is None)."""

    n: torch.Tensor  # (W,) long, >= 1
    n_max: int
    heads: int
    source: torch.Tensor | None  # (W,) long, or None: window w reads row w
    kernel_args: tuple | None  # (n, source) as numpy for the CPU kernels; None: torch path
    after: torch.Tensor | None  # torch path: (W * h, 1, n_max) keys past a window's own count

    @classmethod
    def of(cls, n: torch.Tensor, heads: int, like: torch.Tensor,
           source: torch.Tensor | None = None, kernels: bool | None = None,
           n_max: int | None = None) -> KeyCounts:
        """``kernels`` None: the numba kernels for float32 on the CPU, torch otherwise;
        ``n_max``: ``max(n)`` when the caller knows it (saves a device sync)."""
        if kernels is None:
            kernels = like.device.type == "cpu" and like.dtype == torch.float32
        hi = int(n.max()) if n_max is None else n_max
        if kernels:
            rows = _OWN_ROWS if source is None else source.numpy()
            return cls(n, hi, heads, source, (n.numpy(), rows), None)
        after = None
        if int(n.min()) != hi:
            after = torch.arange(hi, device=n.device) >= n[:, None]  # (W, n_max)
            after = after.repeat_interleave(heads, 0)[:, None]
        return cls(n, hi, heads, source, None, after)


def attend_one_query(
    q: torch.Tensor,  # (W, h, dh)
    k: torch.Tensor,  # (U, h, cap, dh) contiguous: a KV cache block (U = W) or memory keys
    v: torch.Tensor,  # (U, h, cap, dh) contiguous
    keys: KeyCounts,  # window w attends to the first keys.n[w] keys of row keys.source[w]
    new: tuple[torch.Tensor, torch.Tensor] | None = None,  # (k, v) each (W, h, dh)
) -> torch.Tensor:
    """Softmax attention (scale ``dh ** -0.5``) of each window's query to its keys; returns
    (W, h, dh). With ``new`` (a KV cache step, windows reading their own rows), the window's
    newest key and value are first written to its slot ``n - 1`` of ``k``/``v`` (in the
    kernels, in the same pass that reads the window, instead of a scattered write that costs
    as much as the attention)."""
    w, h, dh = q.shape
    r = w * h
    if new is not None and keys.source is not None:
        raise ValueError("a cache step appends to each window's own key row (source None)")
    qf = q.reshape(r, dh).contiguous()
    if keys.kernel_args is not None:
        kf, vf = k.view(-1, k.shape[2], dh), v.view(-1, v.shape[2], dh)  # (U * h, cap, dh)
        k_new = v_new = qf  # not read unless appending
        if new is not None:
            k_new, v_new = (t.reshape(r, dh).contiguous() for t in new)
        s = q.new_empty(r, keys.n_max)
        _append_and_score(qf.numpy(), kf.numpy(), k_new.numpy(), new is not None,
                          *keys.kernel_args, h, dh ** -0.5, s.numpy())
        out = q.new_empty(r, dh)
        _append_and_weigh(torch.softmax(s, -1).numpy(), vf.numpy(), v_new.numpy(),
                          new is not None, *keys.kernel_args, h, out.numpy())
        return out.view(w, h, dh)
    if keys.source is not None:
        k, v = k[keys.source], v[keys.source]  # (W, h, cap, dh) copies (not a cache step)
    kf, vf = k.view(r, -1, dh), v.view(r, -1, dh)
    if new is not None:  # views of the cache: the writes land in it
        rows, slot = torch.arange(r, device=q.device), (keys.n - 1).repeat_interleave(h)
        kf[rows, slot] = new[0].reshape(r, dh)
        vf[rows, slot] = new[1].reshape(r, dh)
    s = torch.bmm(qf[:, None], kf[:, :keys.n_max].transpose(1, 2)).mul_(dh ** -0.5)  # (r, 1, L)
    if keys.after is not None:
        s = s.masked_fill(keys.after, float("-inf"))
    return torch.bmm(torch.softmax(s, -1), vf[:, :keys.n_max]).view(w, h, dh)
