"""Benchmark autoregressive sampling with and without the key/value cache.

CPU: 35-character sentences, same model, same seed, cached vs uncached; asserts identical
outputs (pen states and character indices equal, points within 1e-5) and prints medians of
``--repeats`` runs. With ``--device cuda``: batched throughput (points per second) too.

    python scripts/bench_sampling.py [--sizes demo mid] [--batch 1] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial

import numpy as np
import torch

from cashg.model import CASHG, count_parameters
from cashg.model.presets import MID
from cashg.params import load_section
from cashg.sampling import SamplingOptions, encode_texts, sample

TEXT = "the quick brown fox jumps over it a"  # 35 characters


def _model(size: str, device: str) -> CASHG:
    cfg = load_section("model") if size == "demo" else MID
    torch.manual_seed(0)
    m = CASHG(cfg).to(device).eval()
    with torch.no_grad():  # a trained model writes several points per character; bias the
        m.head.proj.bias[:4] = torch.tensor([4.0, 0.0, -2.0, -2.0])  # random one likewise
    return m


def _time(fn, repeats: int, device: str):
    times, out = [], None
    for _ in range(repeats):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["demo", "mid"], choices=["demo", "mid"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-char-points", type=int, default=20)
    ap.add_argument("--throughput-batches", nargs="+", type=int, default=[1, 16, 64, 256])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    assert len(TEXT) == 35
    print(f"device={args.device} threads={args.threads} torch={torch.__version__}")
    for size in args.sizes:
        model = _model(size, args.device)
        cps, mask = encode_texts([TEXT] * args.batch, args.device)
        imgs = torch.rand(args.batch, 15, 64, 64, generator=torch.Generator().manual_seed(0))
        imgs = imgs.to(args.device)
        results = {}
        for use_cache in (True, False):
            opts = SamplingOptions(seed=1, use_cache=use_cache,
                                   max_char_points=args.max_char_points)
            results[use_cache] = _time(partial(sample, model, cps, mask, imgs, opts),
                                       args.repeats, args.device)
        (t_c, a), (t_u, b) = results[True], results[False]
        for i in range(args.batch):
            assert np.array_equal(a.pen[i], b.pen[i]) and np.array_equal(a.char_index[i],
                                                                           b.char_index[i])
            assert np.allclose(a.deltas[i], b.deltas[i], atol=1e-5, rtol=0)
        n_pts = sum(len(x) for x in a.deltas)
        print(f"[{size}] params={count_parameters(model)} points={n_pts} batch={args.batch} "
              f"cached={t_c:.3f}s uncached={t_u:.3f}s speedup={t_u / t_c:.1f}x "
              f"(median of {args.repeats}; outputs identical)")
        if args.device.startswith("cuda"):
            for bsz in args.throughput_batches:
                cps, mask = encode_texts([TEXT] * bsz, args.device)
                imgs = torch.rand(bsz, 15, 64, 64, device=args.device)
                opts = SamplingOptions(seed=1, max_char_points=args.max_char_points)
                t, res = _time(partial(sample, model, cps, mask, imgs, opts), args.repeats,
                               args.device)
                pts = sum(len(x) for x in res.deltas)
                print(f"[{size}] cuda batch={bsz}: {pts / t:,.0f} points/s ({t:.3f}s, {pts} pts)")


if __name__ == "__main__":
    main()
