"""Benchmark autoregressive sampling with and without the key/value cache.

CPU: 35-character sentences, same model, same seed, cached vs uncached; asserts identical
outputs (pen states and character indices equal, points within 1e-5) and prints medians of
``--repeats`` runs (wall clock and process CPU time: the CPU may be shared) for each setting:

- ``fixed N``: every character gets exactly N points (``min_char_points = max_char_points =
  N``: end-of-character states are suppressed until the N-th point), so both modes do identical
  work at a realistic window length. N defaults to the median points per character of the
  preprocessed data (``results/preprocess/*/sentences.h5``; 50 when there is none), plus 50.
- ``early stop, max M``: the model's own end-of-character states with a cap of M points (the
  original setting of this benchmark; the random model's head is biased towards continuing).

Then batched throughput (points per second, cached only; default batch 64 on the CPU,
1 16 64 256 on CUDA), per setting and ``--variants``: ``same``: the 35-character sentence in
every row; ``mixed``: sentences of 12 to 58 characters (every row advances on its own; the batch
ends with its longest row); ``writers``: the mixed sentences by 8 writers (rows of a writer share
its references, as in a test split); otherwise every row has its own random references.

    python scripts/measure/bench_sampling.py [--sizes demo mid] [--batches 1 8] [--repeats 3]
        [--throughput-batches 64] [--threads 1]

Runs against any version of ``cashg.generation.sampling`` with ``sample``/``SamplingOptions``/
``encode_texts`` (e.g. an older checkout on ``PYTHONPATH``) for before/after figures.
"""

from __future__ import annotations

import argparse
import glob
import statistics
import time
from functools import partial

import numpy as np
import torch

from cashg.core.ink import InkFile
from cashg.core.params import load_section
from cashg.generation.sampling import SamplingOptions, encode_texts, sample
from cashg.model import CASHG, count_parameters
from cashg.model.presets import MID

TEXT = "the quick brown fox jumps over it a"  # 35 characters
FALLBACK_POINTS = 50
WORDS = ("sphinx of black quartz judge my vow pack my box with five dozen liquor jugs how "
         "vexingly quick daft zebras jump").split()


def mixed_texts(n: int, seed: int = 0) -> list[str]:
    """``n`` sentences of 12 to 58 characters from a fixed word list (seeded)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        target, words = int(rng.integers(12, 59)), []
        while len(" ".join(words)) < target:
            words.append(WORDS[int(rng.integers(len(WORDS)))])
        out.append(" ".join(words)[:target])
    return out


def _model(size: str, device: str) -> CASHG:
    cfg = load_section("model") if size == "demo" else MID
    torch.manual_seed(0)
    m = CASHG(cfg).to(device).eval()
    with torch.no_grad():  # a trained model writes several points per character; bias the
        m.head.proj.bias[:4] = torch.tensor([4.0, 0.0, -2.0, -2.0])  # random one likewise
    return m


def median_points_per_char(pattern: str = "results/preprocess/*/sentences.h5") -> tuple[int, str]:
    """(median number of points of the characters that have points, where it came from)."""
    counts = []
    paths = sorted(glob.glob(pattern))
    for path in paths:
        with InkFile(path) as f:
            for s in f:
                c = np.bincount(s.char_index[s.char_index >= 0])
                counts.append(c[c > 0])
    if not counts:
        return FALLBACK_POINTS, f"no {pattern}: assumed"
    c = np.concatenate(counts)
    return int(np.median(c)), f"median of {len(c)} characters in {', '.join(paths)}"


def _time(fn, repeats: int, device: str):
    """(median wall s, median CPU s, last output)."""
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus), out


def _compare(model, batch: int, opts: SamplingOptions, repeats: int, device: str, label: str):
    cps, mask = encode_texts([TEXT] * batch, device)
    imgs = torch.rand(batch, 15, 64, 64, generator=torch.Generator().manual_seed(0)).to(device)
    res = {}
    for use_cache in (True, False):
        o = SamplingOptions(**{**opts.__dict__, "use_cache": use_cache})
        res[use_cache] = _time(partial(sample, model, cps, mask, imgs, o), repeats, device)
    (w_c, c_c, a), (w_u, c_u, b) = res[True], res[False]
    for i in range(batch):
        assert np.array_equal(a.pen[i], b.pen[i]) and np.array_equal(a.char_index[i],
                                                                       b.char_index[i])
        assert np.allclose(a.deltas[i], b.deltas[i], atol=1e-5, rtol=0)
    n = sum(len(x) for x in a.deltas)
    print(f"  {label:24s} batch={batch} points={n} ({n / (35 * batch):.1f}/char) | "
          f"cached {w_c:.3f}s wall {c_c:.3f}s cpu = {n / w_c:,.0f} pts/s | "
          f"uncached {w_u:.3f}s wall {c_u:.3f}s cpu = {n / w_u:,.0f} pts/s | "
          f"speed-up {w_u / w_c:.1f}x wall, {c_u / c_c:.1f}x cpu", flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["demo"], choices=["demo", "mid"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batches", nargs="*", type=int, default=[1, 8],
                    help="batch sizes of the cached-vs-uncached check (none: skip)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--fixed-points", nargs="*", type=int, default=None,
                    help="points per character of the fixed settings (default: data median, 50)")
    ap.add_argument("--early-stop-max", nargs="*", type=int, default=[20])
    ap.add_argument("--greedy", action="store_true")
    ap.add_argument("--throughput-batches", nargs="*", type=int, default=None,
                    help="batch sizes of the throughput figures (default: 64 on the CPU, "
                         "1 16 64 256 on CUDA; none: skip)")
    ap.add_argument("--variants", nargs="+", default=["same", "mixed", "writers"],
                    choices=["same", "mixed", "writers"], help="throughput batches (see above)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    assert len(TEXT) == 35
    fixed = args.fixed_points
    if fixed is None:
        med, where = median_points_per_char()
        print(f"points per character: {med} ({where})")
        fixed = sorted({med, FALLBACK_POINTS})
    settings = [(f"fixed {n} pts/char", dict(max_char_points=n, min_char_points=n))
                for n in fixed]
    settings += [(f"early stop, max {n}", dict(max_char_points=n)) for n in args.early_stop_max]
    print(f"device={args.device} threads={args.threads} torch={torch.__version__} "
          f"repeats={args.repeats} (medians) greedy={args.greedy}")
    for size in args.sizes:
        model = _model(size, args.device)
        print(f"[{size}] params={count_parameters(model)}")
        for label, kw in settings:
            for batch in args.batches:
                opts = SamplingOptions(seed=1, greedy=args.greedy, **kw)
                _compare(model, batch, opts, args.repeats, args.device, label)
        batches = args.throughput_batches
        if batches is None:
            batches = [1, 16, 64, 256] if args.device.startswith("cuda") else [64]
        for bsz in batches:
            for variant in args.variants:
                texts = [TEXT] * bsz if variant == "same" else mixed_texts(bsz)
                cps, mask = encode_texts(texts, args.device)
                refs = bsz if variant != "writers" else min(8, bsz)
                imgs = torch.rand(refs, 15, 64, 64, generator=torch.Generator().manual_seed(0))
                imgs = imgs[torch.arange(bsz) % refs].to(args.device)
                for label, kw in settings:
                    opts = SamplingOptions(seed=1, greedy=args.greedy, **kw)
                    wall, cpu, res = _time(partial(sample, model, cps, mask, imgs, opts),
                                           args.repeats, args.device)
                    pts = sum(len(x) for x in res.deltas)
                    print(f"[{size}] throughput {args.device} {label:22s} {variant:7s} "
                          f"batch={bsz}: {pts / wall:,.0f} points/s wall, {pts / cpu:,.0f} "
                          f"points/s cpu ({wall:.3f}s wall, {cpu:.3f}s cpu, {pts} pts)",
                          flush=True)


if __name__ == "__main__":
    main()
