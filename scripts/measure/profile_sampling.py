"""Profile autoregressive sampling on the CPU with torch.profiler (one thread by default).

Demo model (``params.yaml`` ``model`` section, random weights, the head biased towards
continuing a character as in ``bench_sampling.py``), ``--batch`` rows of the 35-character
benchmark sentence, ``--points`` points per character (min = max: the same work in any version
of the sampler), one warm-up call, then one profiled call. Prints the points per second of the
profiled call and the top ``--rows`` rows of ``key_averages()`` sorted by self CPU time.

The numba attention kernels of :mod:`cashg.model.step_attention` are not torch operators; when
present they are wrapped in ``record_function`` here (only here: no cost in normal runs) so that
they show up as ``numba::<kernel>`` rows. Runs against any version of ``cashg.generation.sampling`` with
``sample``/``SamplingOptions``/``encode_texts`` (e.g. an older checkout on ``PYTHONPATH``).

    python scripts/measure/profile_sampling.py [--batch 64] [--points 50] [--rows 15]
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from cashg.core.params import load_section
from cashg.generation.sampling import SamplingOptions, encode_texts, sample
from cashg.model import CASHG

TEXT = "the quick brown fox jumps over it a"


def _labelled(name: str, fn: Callable) -> Callable:
    def run(*args):
        with record_function(f"numba::{name}"):
            return fn(*args)

    return run


def label_numba_kernels() -> list[str]:
    """Wrap the step-attention kernels (when this version has them) for the profiler."""
    try:
        mod = importlib.import_module("cashg.model.step_attention")
    except ImportError:
        return []
    names = [n for n in dir(mod) if n.startswith("_append_and_")]
    for n in names:
        setattr(mod, n, _labelled(n.lstrip("_"), getattr(mod, n)))
    return names


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--points", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rows", type=int, default=15)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = CASHG(load_section("model")).eval()
    with torch.no_grad():
        model.head.proj.bias[:4] = torch.tensor([4.0, 0.0, -2.0, -2.0])
    labelled = label_numba_kernels()
    cps, mask = encode_texts([TEXT] * args.batch)
    imgs = torch.rand(args.batch, 15, 64, 64, generator=torch.Generator().manual_seed(0))
    opts = SamplingOptions(seed=1, max_char_points=args.points, min_char_points=args.points)
    sample(model, cps, mask, imgs, opts)  # warm-up (numba compilation or cache load)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        res = sample(model, cps, mask, imgs, opts)
        wall = time.perf_counter() - t0
    pts = sum(len(d) for d in res.deltas)
    print(f"torch {torch.__version__}, threads {args.threads}, batch {args.batch}, "
          f"{len(TEXT)} characters x {args.points} points: {pts} points in {wall:.2f} s under "
          f"the profiler = {pts / wall:,.0f} points/s; numba kernels labelled: "
          f"{labelled or 'none'}")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
