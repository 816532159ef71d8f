"""Exact DTW against a plain O(nm) reference; FastDTW variants against the exact bound."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cashg.core.geometry.normalize import normalize_height_lenient
from cashg.metrics import dtw, dtw_batch
from cashg.metrics.dtw import dtw_reference
from cashg.metrics.variants import (
    dtw_olhwg,
    dtw_sdt,
    fastdtw,
    rdp_mask,
    sdt_normalize,
    sdt_prepare,
)


def _py_dtw(a, b):
    """Independent pure-Python recursion (lists, math.hypot) - the oracle."""
    import math

    n, m = len(a), len(b)
    inf = float("inf")
    d = [[inf] * (m + 1) for _ in range(n + 1)]
    d[0][0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            c = math.sqrt((a[i - 1][0] - b[j - 1][0]) ** 2 + (a[i - 1][1] - b[j - 1][1]) ** 2)
            d[i][j] = c + min(d[i - 1][j], d[i][j - 1], d[i - 1][j - 1])
    return d[n][m]


@pytest.mark.parametrize("n,m", [(1, 1), (1, 7), (7, 1), (2, 3), (13, 40), (64, 63), (100, 17)])
def test_dtw_matches_reference(n, m):
    rng = np.random.default_rng(n * 1000 + m)
    a = rng.normal(size=(n, 2))
    b = rng.normal(size=(m, 2))
    ref = _py_dtw(a.tolist(), b.tolist())
    assert dtw(a, b) == pytest.approx(ref, rel=1e-12)
    assert dtw(b, a) == dtw(a, b)
    assert dtw_reference(a, b) == pytest.approx(ref, rel=1e-12)


def test_dtw_hand_case():
    a = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]])
    b = np.array([[0.0, 1.0], [2.0, 1.0]])
    # costs: c(a0,b0)=1, c(a1,b0)=c(a1,b1)=sqrt2, c(a2,b1)=1; best path 1 + sqrt2 + 1
    expected = 2 + np.sqrt(2)
    assert dtw(a, b) == pytest.approx(expected)
    assert dtw(a, a) == 0.0


def test_dtw_batch_matches_single():
    rng = np.random.default_rng(3)
    a = [rng.random((rng.integers(1, 80), 2)) for _ in range(25)]
    b = [rng.random((rng.integers(1, 80), 2)) for _ in range(25)]
    out = dtw_batch(a, b)
    assert out.tolist() == [dtw(x, y) for x, y in zip(a, b)]


def test_dtw_rejects_bad_input():
    with pytest.raises(ValueError, match="empty"):
        dtw(np.zeros((0, 2)), np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"\(n, 2\)"):
        dtw(np.zeros((3, 3)), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="NaN"):
        dtw(np.array([[np.nan, 0.0]]), np.zeros((3, 2)))


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 30), st.integers(1, 30), st.integers(0, 2**31 - 1))
def test_dtw_invariants(n, m, seed):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, 2))
    b = rng.normal(size=(m, 2))
    d = dtw(a, b)
    assert d >= 0
    assert d == pytest.approx(_py_dtw(a.tolist(), b.tolist()), rel=1e-12)
    shift = rng.normal(size=2)
    assert dtw(a + shift, b + shift) == pytest.approx(d, rel=1e-9, abs=1e-12)


def test_normalize_height():
    xy = np.array([[10.0, 5.0], [14.0, 7.0], [12.0, 9.0]])
    out = normalize_height_lenient(xy)
    assert out.min(axis=0).tolist() == [0.0, 0.0]
    assert out[:, 1].max() == 1.0
    assert out[1].tolist() == [1.0, 0.5]
    flat = normalize_height_lenient(np.array([[0.0, 2.0], [4.0, 2.0]]))
    assert flat.tolist() == [[0.0, 0.0], [1.0, 0.0]]


@pytest.mark.parametrize("metric", ["euclidean", "l1"])
def test_fastdtw_upper_bound_and_exact_with_wide_radius(metric):
    rng = np.random.default_rng(5)
    for n, m in [(3, 4), (50, 61), (200, 170)]:
        a = np.cumsum(rng.normal(size=(n, 2)), 0)
        b = np.cumsum(rng.normal(size=(m, 2)), 0)
        exact = _py_dtw_metric(a, b, metric)
        approx, path = fastdtw(a, b, radius=1, metric=metric)
        assert approx >= exact - 1e-9
        wide, _ = fastdtw(a, b, radius=max(n, m), metric=metric)
        assert wide == pytest.approx(exact, rel=1e-12)
        assert path[0].tolist() == [0, 0] and path[-1].tolist() == [n - 1, m - 1]
        steps = np.diff(path, axis=0)
        assert ((steps >= 0) & (steps <= 1)).all() and (steps.sum(1) >= 1).all()
        cost = np.abs(a[path[:, 0]] - b[path[:, 1]])
        along = (np.sqrt((cost**2).sum(1)) if metric == "euclidean" else cost.sum(1)).sum()
        assert along == pytest.approx(approx, rel=1e-9)


def _py_dtw_metric(a, b, metric):
    if metric == "euclidean":
        return _py_dtw(a.tolist(), b.tolist())
    n, m = len(a), len(b)
    d = np.full((n + 1, m + 1), np.inf)
    d[0, 0] = 0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d[i, j] = np.abs(a[i - 1] - b[j - 1]).sum() + min(d[i - 1, j], d[i, j - 1], d[i - 1, j - 1])
    return d[n, m]


def test_sdt_normalize_moments():
    # one straight stroke from (0,0) to (4,0) plus a last point (excluded by SDT's loop)
    xy = np.array([[0.0, 0.0], [2.0, 0.0], [4.0, 0.0], [9.0, 9.0]])
    pen = np.array([0, 0, 0, 1])
    out = sdt_normalize(xy, pen)
    # segments (0,2),(2,4): centroid 2, var_x of a uniform segment [0,4] = 16/12
    assert out[1].tolist() == pytest.approx([0.0, 0.0])
    assert out[2, 0] == pytest.approx(2.0 / np.sqrt(16 / 12))


def test_rdp_and_variants_identity():
    t = np.linspace(0, 1, 50)
    xy = np.stack([t, 0.001 * np.sin(40 * t)], 1)
    pen = np.zeros(50, int)
    pen[-1] = 3
    keep = rdp_mask(xy, pen, 0.02)
    assert keep[0] and keep[-1] and keep.sum() == 2
    xy2 = np.stack([t, np.sin(6 * t)], 1)
    assert dtw_sdt(xy2, pen, xy2, pen) == (0.0, 0.0)
    assert dtw_olhwg(xy2, pen, xy2, pen) == (0.0, 0.0)
    raw, norm = dtw_sdt(xy2, pen, xy2[::-1].copy(), pen)
    assert raw > 0 and norm == pytest.approx(raw / 50)


def test_dtw_sdt_starts_both_glyphs_at_the_origin():
    """SDT's DTW (dailenson/SDT: the GT's first offset is zeroed before the cumulative sum,
    the prediction starts at a zero token): after the moment normalisation both glyphs start
    at the origin, not at their centroid. A stroke drawn left to right vs the same stroke drawn
    right to left (and moved): |a - b| along the diagonal = (0 + 1 + 2 + 2) * 2 * sqrt(3) / 2."""
    pen = np.array([0, 0, 0, 3])
    gt = np.array([[0.0, 0.0], [2.0, 0.0], [4.0, 0.0], [4.0, 0.0]])
    pred = np.array([[4.0, 0.0], [2.0, 0.0], [0.0, 0.0], [0.0, 0.0]]) + [7.0, 3.0]
    s3 = np.sqrt(3.0)  # the moment sigma of both is 2 / sqrt(3) (test above)
    assert sdt_prepare(gt, pen)[:, 0] == pytest.approx([0, s3, 2 * s3, 2 * s3])
    assert sdt_prepare(pred, pen)[:, 0] == pytest.approx([0, -s3, -2 * s3, -2 * s3])
    raw, norm = dtw_sdt(gt, pen, pred, pen)
    assert raw == pytest.approx(10 * s3) and norm == pytest.approx(10 * s3 / 4)
