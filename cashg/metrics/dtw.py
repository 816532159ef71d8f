"""Exact dynamic time warping (DTW) between two 2-D trajectories, numba kernels.

Definition (paper Sec. 4.1, docs/metrics.md): the step cost is the Euclidean distance
between two points and the DTW value is the sum of step costs along the optimal warping path,

    D[0, 0] = 0,  D[i, 0] = D[0, j] = inf,
    D[i, j] = ||a[i-1] - b[j-1]||_2 + min(D[i-1, j], D[i, j-1], D[i-1, j-1]),
    DTW(a, b) = D[n, m].

Not squared, not the root of a sum of squares, not an approximation (fastdtw lives in
:mod:`cashg.metrics.variants`, clearly named). No normalisation happens here.

Speed. The matrix is swept by anti-diagonals (``k = i + j``): every cell of a diagonal
depends only on the two previous diagonals, so the inner loop has no loop-carried dependency
and LLVM vectorises it (the square root included) without ``fastmath``. Every cell performs
exactly the same floating-point operations as the row-by-row recursion (min is exact and
order-free; ``(a-b)**2 == (b-a)**2``), so the result is bit-identical to the textbook
recursion. Memory: three diagonals of ``min(n, m) + 1`` float64 each; the second sequence is
stored reversed so that both coordinates are read contiguously along a diagonal.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["dtw", "dtw_batch", "dtw_reference"]


@numba.njit(cache=True, nogil=True, boundscheck=False, inline="always")
def _diagonal(
    ax: np.ndarray,
    ay: np.ndarray,
    bx: np.ndarray,
    by: np.ndarray,
    up: np.ndarray,
    left: np.ndarray,
    diag: np.ndarray,
    out: np.ndarray,
) -> None:
    """One anti-diagonal: ``out[t] = ||a_t - b_t|| + min(up[t], left[t], diag[t])``, all (L,).

    Written over slices so that LLVM sees a simple counted loop over distinct views and emits
    packed ``vsqrtpd``/``vminpd`` (checked in tests via the benchmark's speed, not asserted).
    """
    for t in range(ax.shape[0]):
        dx = ax[t] - bx[t]
        dy = ay[t] - by[t]
        c = np.sqrt(dx * dx + dy * dy)
        u = up[t]
        w = left[t]
        g = diag[t]
        best = u if u < w else w
        best = g if g < best else best
        out[t] = c + best


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _dtw_kernel(ax: np.ndarray, ay: np.ndarray, bx: np.ndarray, by: np.ndarray) -> float:
    """DTW of (n,) ax/ay against (m,) bx/by with n <= m (callers swap). float64 throughout."""
    n = ax.shape[0]
    m = bx.shape[0]
    # reversed b: brx[t] = bx[m - 1 - t], so b[j-1] = brx[m - j] = brx[(m - k) + i] on diagonal k
    brx = bx[::-1].copy()
    bry = by[::-1].copy()
    inf = np.inf
    d2 = np.full(n + 1, inf)  # diagonal k-2, indexed by i: d2[i] = D[i, k-2-i]
    d1 = np.full(n + 1, inf)  # diagonal k-1
    d0 = np.full(n + 1, inf)  # diagonal k (being written)
    d1[0] = 0.0  # diagonal 0 holds D[0, 0] = 0 only
    for k in range(1, n + m + 1):
        lo = max(1, k - m)
        hi = min(n, k - 1)
        off = m - k
        if hi >= lo:
            _diagonal(
                ax[lo - 1 : hi],
                ay[lo - 1 : hi],
                brx[off + lo : off + hi + 1],
                bry[off + lo : off + hi + 1],
                d1[lo - 1 : hi],  # D[i-1, j]
                d1[lo : hi + 1],  # D[i, j-1]
                d2[lo - 1 : hi],  # D[i-1, j-1]
                d0[lo : hi + 1],
            )
        d0[0] = inf  # D[0, k]
        if k <= n:
            d0[k] = inf  # D[k, 0]
        d2, d1, d0 = d1, d0, d2
    return d1[n]


@numba.njit(cache=True, nogil=True)
def _dtw_pair(a: np.ndarray, b: np.ndarray) -> float:
    """DTW of (n, 2) ``a`` and (m, 2) ``b`` (float64, contiguous columns made here)."""
    if a.shape[0] <= b.shape[0]:
        return _dtw_kernel(a[:, 0].copy(), a[:, 1].copy(), b[:, 0].copy(), b[:, 1].copy())
    return _dtw_kernel(b[:, 0].copy(), b[:, 1].copy(), a[:, 0].copy(), a[:, 1].copy())


@numba.njit(cache=True, parallel=True)
def _dtw_batch_kernel(
    a_xy: np.ndarray, a_off: np.ndarray, b_xy: np.ndarray, b_off: np.ndarray
) -> np.ndarray:
    """DTW of pair p = a_xy[a_off[p]:a_off[p+1]] vs b_xy[b_off[p]:b_off[p+1]], in parallel."""
    n_pairs = a_off.shape[0] - 1
    out = np.empty(n_pairs)
    for p in numba.prange(n_pairs):
        out[p] = _dtw_pair(a_xy[a_off[p] : a_off[p + 1]], b_xy[b_off[p] : b_off[p + 1]])
    return out


def _as_xy(x: np.ndarray, name: str) -> np.ndarray:
    arr = np.ascontiguousarray(x, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"dtw: {name} must have shape (n, 2), got {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"dtw: {name} is empty (DTW is undefined for an empty trajectory)")
    if not np.isfinite(arr).all():
        raise ValueError(f"dtw: {name} contains NaN or inf")
    return arr


def dtw(a: np.ndarray, b: np.ndarray) -> float:
    """Exact DTW_raw of two trajectories ``a`` (n, 2) and ``b`` (m, 2), as given.

    Step cost: Euclidean distance; value: the sum along the optimal path (see module doc).
    Symmetric: ``dtw(a, b) == dtw(b, a)`` exactly.
    """
    return float(_dtw_pair(_as_xy(a, "a"), _as_xy(b, "b")))


def dtw_batch(pairs_a: list[np.ndarray], pairs_b: list[np.ndarray]) -> np.ndarray:
    """Exact DTW of each pair ``(pairs_a[p], pairs_b[p])``; (P,) float64.

    Runs the pairs in parallel over numba's threads (``numba.set_num_threads`` sets how many).
    """
    if len(pairs_a) != len(pairs_b):
        raise ValueError(f"dtw_batch: {len(pairs_a)} left vs {len(pairs_b)} right trajectories")
    if not pairs_a:
        return np.zeros(0)
    a = [_as_xy(x, f"pairs_a[{i}]") for i, x in enumerate(pairs_a)]
    b = [_as_xy(x, f"pairs_b[{i}]") for i, x in enumerate(pairs_b)]
    a_off = np.concatenate([[0], np.cumsum([len(x) for x in a])]).astype(np.int64)
    b_off = np.concatenate([[0], np.cumsum([len(x) for x in b])]).astype(np.int64)
    return _dtw_batch_kernel(np.concatenate(a), a_off, np.concatenate(b), b_off)


def dtw_reference(a: np.ndarray, b: np.ndarray) -> float:
    """Plain O(nm) numpy reference of the same recursion, row by row (tests only; slow)."""
    a = _as_xy(a, "a")
    b = _as_xy(b, "b")
    n, m = len(a), len(b)
    cost = np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))  # (n, m)
    d = np.full((n + 1, m + 1), np.inf)
    d[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d[i, j] = cost[i - 1, j - 1] + min(d[i - 1, j], d[i, j - 1], d[i - 1, j - 1])
    return float(d[n, m])
