"""Geometry of preprocessing: RDP oracle, resampling, deskew, height normalisation."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from cashg.core.geometry import (
    GeometryShapeError,
    capped_counts,
    capped_spacing,
    deskew,
    normalize_height,
    piece_lengths,
    rdp_indices,
    rdp_mask,
    resample_pieces,
    resample_pieces_to_counts,
    resample_polyline,
    rotate,
    skew_angle_deg,
    weak_rdp_mask,
)

rdp_pkg = pytest.importorskip("rdp")


def _oracle(points: np.ndarray, eps: float) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy 2 deprecates 2-D np.cross inside rdp 0.8
        return np.asarray(rdp_pkg.rdp(points, eps, return_mask=True), dtype=bool)


def _random_walk(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.cumsum(rng.normal(size=(n, 2)), axis=0)


def test_rdp_matches_oracle_on_random_strokes():
    rng = np.random.default_rng(1)
    for trial in range(300):
        n = int(rng.integers(1, 120))
        pts = _random_walk(rng, n)
        if trial % 5 == 0:  # integer grid: exact ties and repeated points
            pts = np.round(pts)
        if trial % 7 == 0 and n > 3:  # closed stroke: start == end (degenerate line)
            pts[-1] = pts[0]
        eps = float(rng.choice([0.0, 0.1, 0.5, 1.0, 3.0]))
        np.testing.assert_array_equal(rdp_mask(pts, eps), _oracle(pts, eps), err_msg=f"{trial}")


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(2, 40), st.just(2)),
              elements=st.integers(-20, 20).map(float)),
       st.sampled_from([0.0, 0.5, 1.0, 2.0]))
def test_rdp_oracle_hypothesis_grid(points, eps):
    np.testing.assert_array_equal(rdp_mask(points, eps), _oracle(points, eps))


def test_rdp_keeps_end_points_and_drops_collinear():
    pts = np.column_stack([np.arange(10.0), np.zeros(10)])
    np.testing.assert_array_equal(rdp_indices(pts, 0.01), [0, 9])
    pts[5, 1] = 3.0
    assert set(rdp_indices(pts, 0.5).tolist()) == {0, 4, 5, 6, 9}  # the spike and its feet


def test_weak_rdp_guard():
    rng = np.random.default_rng(3)
    # char 0: 8 points (<= 10, untouched); char 1: straight line (would lose > half at every
    # epsilon -> skipped); char 2: noisy curve simplified with some epsilon.
    c0 = _random_walk(rng, 8)
    c1 = np.column_stack([np.linspace(0, 1, 30), np.zeros(30)])
    t = np.linspace(0, 2 * np.pi, 60)
    c2 = np.column_stack([np.cos(t), np.sin(t)]) + rng.normal(scale=1e-3, size=(60, 2))
    pts = np.concatenate([c0, c1, c2])
    offs = np.array([0, 8, 38, 98])
    keep, eps = weak_rdp_mask(pts, offs, np.array([0, 1, 2, 3]), 0.006)
    assert keep[:8].all() and eps[0] == 0.0
    assert keep[8:38].all() and eps[1] == 0.0
    assert eps[2] > 0 and keep[38] and keep[97]
    removed = 60 - keep[38:].sum()
    assert 0 < removed <= 30
    # the chosen epsilon is the first of 0.006 / 2**k that removes at most half
    np.testing.assert_array_equal(keep[38:], rdp_mask(np.ascontiguousarray(c2), eps[2]))
    if eps[2] < 0.006:
        assert 60 - rdp_mask(np.ascontiguousarray(c2), eps[2] * 2).sum() > 30


def _hausdorff(a: np.ndarray, b_poly: np.ndarray) -> float:
    """Max distance of points ``a`` to the polyline ``b_poly`` and of b's vertices to a's."""
    def to_poly(p, poly):
        if len(poly) == 1:
            return np.hypot(*(p - poly[0]).T)
        s, e = poly[:-1], poly[1:]
        d = e - s
        ll = np.maximum((d**2).sum(1), 1e-300)
        t = np.clip(((p[:, None] - s[None]) * d[None]).sum(-1) / ll, 0, 1)
        proj = s[None] + t[..., None] * d[None]
        return np.sqrt(((p[:, None] - proj) ** 2).sum(-1)).min(1)
    return float(max(to_poly(a, b_poly).max(), to_poly(b_poly, a).max()))


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(2, 60), st.just(2)),
              elements=st.floats(-50, 50)),
       st.floats(0.05, 5.0))
def test_resample_keeps_ends_and_shape(points, spacing):
    out = resample_polyline(points, spacing)
    np.testing.assert_array_equal(out[0], points[0])
    np.testing.assert_array_equal(out[-1], points[-1])
    # every new point lies on the original polyline; the original vertices are within one
    # resampling step (the chord cut off a corner) of the new polyline
    length = piece_lengths(points, np.array([0, len(points)]))[0]
    step = length / max(len(out) - 1, 1)
    assert _hausdorff(out, points) <= step + 1e-6


def test_resample_spacing_and_counts():
    line = np.column_stack([np.linspace(0, 10, 7), np.zeros(7)])
    out = resample_polyline(line, 1.0)
    assert len(out) == 11
    np.testing.assert_allclose(np.diff(out[:, 0]), 1.0)
    # pieces: single point stays one; zero-length keeps first and last
    pts = np.array([[0.0, 0], [5, 5], [5, 5], [5, 5], [0, 0], [3, 4]])
    new, offs = resample_pieces(pts, np.array([0, 1, 4, 6]), 1.0)
    np.testing.assert_array_equal(offs, [0, 1, 3, 9])
    np.testing.assert_array_equal(new[offs[2]], [0, 0])
    np.testing.assert_array_equal(new[-1], [3, 4])


def test_capped_spacing():
    n_in = np.array([50, 50], np.int64)
    lengths = np.array([10.0, 30.0])
    sp = capped_spacing(n_in, lengths, 0.1, 100)
    pts = np.concatenate([np.column_stack([np.linspace(0, L, 50), np.zeros(50)]) for L in lengths])
    _, offs = resample_pieces(pts, np.array([0, 50, 100]), sp)
    assert offs[-1] <= 100 and offs[-1] >= 95
    assert capped_spacing(n_in, lengths, 1.0, 100) == 1.0  # already under the cap


def test_capped_counts_exact_and_proportional():
    # app. B.4 as the authors' resample_trajectory_preserve_endpoints: exactly the cap, ends kept
    np.testing.assert_array_equal(capped_counts(np.array([100, 150, 150]), 160), [40, 60, 60])
    np.testing.assert_array_equal(capped_counts(np.array([50, 60]), 160), [50, 60])  # under
    np.testing.assert_array_equal(capped_counts(np.array([160]), 160), [160])
    np.testing.assert_array_equal(capped_counts(np.array([1, 1, 300]), 10), [1, 1, 8])
    # more stroke ends than the cap: the ends stay (the character stays above the cap)
    np.testing.assert_array_equal(capped_counts(np.array([5] * 6 + [1]), 10), [2] * 6 + [1])
    with pytest.raises(GeometryShapeError):
        capped_counts(np.array([-1, 5]), 3)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 400), min_size=1, max_size=12), st.integers(1, 300))
def test_capped_counts_properties(n_in, cap):
    n = np.array(n_in, np.int64)
    out = capped_counts(n, cap)
    ends = np.minimum(n, 2)
    assert (out <= n).all() and (out >= ends).all()
    if n.sum() <= cap:
        np.testing.assert_array_equal(out, n)
    elif ends.sum() <= cap:
        assert out.sum() == cap
    else:
        np.testing.assert_array_equal(out, ends)


def test_resample_pieces_to_counts():
    rng = np.random.default_rng(0)
    pts = np.cumsum(rng.normal(size=(30, 2)), axis=0)
    offs = np.array([0, 1, 3, 13, 30])
    new, new_offs = resample_pieces_to_counts(pts, offs, np.array([1, 2, 10, 5]))
    np.testing.assert_array_equal(new_offs, [0, 1, 3, 13, 18])
    np.testing.assert_array_equal(new[:13], pts[:13])  # pieces at their count: as recorded
    np.testing.assert_array_equal(new[13], pts[13])  # the resampled piece keeps its ends
    np.testing.assert_array_equal(new[17], pts[29])
    step = piece_lengths(pts, offs)[3] / 4
    np.testing.assert_allclose(piece_lengths(new, new_offs)[3], piece_lengths(pts, offs)[3],
                               rtol=0.5)
    # the interior lies on the recorded polyline at equal arc-length steps of the original
    again = resample_pieces(pts[13:30], np.array([0, 17]), np.array([step]))[0]
    np.testing.assert_allclose(new[13:18], again)
    for bad in ([0, 2, 10, 5], [1, 1, 10, 5], [1, 2, 10]):
        with pytest.raises(GeometryShapeError):
            resample_pieces_to_counts(pts, offs, np.array(bad))


@settings(max_examples=40, deadline=None)
@given(st.floats(-40, 40), st.floats(0.05, 3.0))
def test_deskew_levels_a_rotated_line(angle, noise):
    rng = np.random.default_rng(0)
    x = np.linspace(0, 100, 200)
    y = rng.normal(scale=noise, size=200)
    line = rotate(np.column_stack([x, y]), angle, np.array([50.0, 0.0]))
    est = skew_angle_deg(line)
    out, applied = deskew(line, 2.0, 45.0)
    if 2.0 <= abs(est) <= 45.0:
        assert applied == pytest.approx(est)
        # y-on-x least squares is not rotation-equivariant under noise: small residual only
        assert abs(skew_angle_deg(out)) < 0.05 * abs(est) + 0.05
        np.testing.assert_allclose(out.mean(0), line.mean(0), atol=1e-9)
        # the noise-free line itself comes out exactly level
        clean = rotate(np.column_stack([x, np.zeros_like(x)]), angle, np.array([50.0, 0.0]))
        level, _ = deskew(clean, 2.0, 45.0)
        if 2.0 <= abs(angle) <= 45.0:
            assert np.ptp(level[:, 1]) < 1e-9
    else:
        assert applied == 0.0
        np.testing.assert_array_equal(out, line)
    if abs(angle) > 3:
        assert est == pytest.approx(angle, abs=1.0)  # y-on-x regression attenuates slightly


def test_deskew_skipped_outside_thresholds():
    x = np.linspace(0, 10, 50)
    for deg, expect in ((1.0, False), (10.0, True), (60.0, False)):
        pts = np.column_stack([x, x * math.tan(math.radians(deg))])
        _, applied = deskew(pts, 2.0, 45.0)
        assert (applied != 0.0) == expect, deg


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(2, 50), st.just(2)),
              elements=st.floats(-1e4, 1e4)))
def test_height_exactly_one_and_aspect_kept(points):
    h = points[:, 1].max() - points[:, 1].min()
    if not h > 0:
        with pytest.raises(ValueError):
            normalize_height(points)
        return
    out, scale, _ = normalize_height(points)
    assert out[:, 1].min() == 0.0 and out[:, 1].max() == 1.0
    assert out[:, 0].min() == 0.0
    w = points[:, 0].max() - points[:, 0].min()
    assert out[:, 0].max() == pytest.approx(w / h, rel=1e-12)
    assert out.astype(np.float32)[:, 1].max() == np.float32(1.0)


# ------------------------------------------------------------------ shape guards


_LINE = np.column_stack([np.arange(6.0), np.zeros(6)])


@pytest.mark.parametrize("bad, match", [
    (np.column_stack([_LINE, np.ones(6)]), r"must be \(N, 2\) x/y, got shape \(6, 3\)"),
    (_LINE[:, :1], r"must be \(N, 2\) x/y, got shape \(6, 1\)"),
    (_LINE.ravel(), r"must be \(N, 2\) x/y, got shape \(12,\)"),
    (np.where(np.arange(12).reshape(6, 2) == 3, np.nan, _LINE), r"has 1 point\(s\) with NaN"),
])
def test_geometry_entry_points_refuse_malformed_points(bad, match):
    """An (N, 3) or (N, 1) array is refused by resampling, never passed silently."""
    calls = {
        "resample_pieces": lambda p: resample_pieces(p, np.array([0, len(p)]), 1.0),
        "resample_polyline": lambda p: resample_polyline(p, 1.0),
        "weak_rdp_mask": lambda p: weak_rdp_mask(p, np.array([0, len(p)]), np.array([0, 1]),
                                                 0.1),
        "rdp_indices": lambda p: rdp_indices(p, 0.1),
        "deskew": lambda p: deskew(p),
        "normalize_height": lambda p: normalize_height(p),
    }
    for name, call in calls.items():
        with pytest.raises(GeometryShapeError, match=f"{name}: points {match}"):
            call(bad)


def test_geometry_offsets_and_spacing_are_checked():
    with pytest.raises(GeometryShapeError, match=r"piece_offsets must rise from 0 to 6.*0\.\.4"):
        resample_pieces(_LINE, np.array([0, 4]), 1.0)
    with pytest.raises(GeometryShapeError, match=r"spacing must be a scalar or \(2,\)"):
        resample_pieces(_LINE, np.array([0, 3, 6]), np.ones(3))
    with pytest.raises(GeometryShapeError, match="spacing must be positive"):
        resample_pieces(_LINE, np.array([0, 6]), 0.0)
    with pytest.raises(GeometryShapeError, match=r"char_piece_offsets must rise from 0 to 2"):
        weak_rdp_mask(_LINE, np.array([0, 3, 6]), np.array([0, 1]), 0.1)
