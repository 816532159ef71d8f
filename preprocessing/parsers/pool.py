"""Run independent parse tasks (one per form / file) in a process pool, in a fixed order.

Results come back in task order whatever the number of workers, so the parsed records (and the
review rows) are identical for ``workers=1`` and ``workers=8``. A tqdm bar on stderr shows
progress.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

from tqdm import tqdm

T = TypeVar("T")
R = TypeVar("R")


def _context() -> multiprocessing.context.BaseContext:
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def run_ordered(
    fn: Callable[[T], R], tasks: Sequence[T], workers: int = 1, desc: str = "parse",
) -> Iterator[R]:
    """Yield ``fn(task)`` for every task, in task order.

    ``workers <= 1`` (or a single task) runs in-process; otherwise a process pool of ``workers``
    processes is used. ``fn`` must be a module-level function and tasks picklable.
    """
    bar = tqdm(total=len(tasks), desc=desc, unit="task", leave=False, dynamic_ncols=True)
    try:
        if workers <= 1 or len(tasks) <= 1:
            for task in tasks:
                yield fn(task)
                bar.update()
            return
        chunksize = max(1, min(64, len(tasks) // (workers * 8)))
        with ProcessPoolExecutor(max_workers=workers, mp_context=_context()) as pool:
            for result in pool.map(fn, tasks, chunksize=chunksize):
                yield result
                bar.update()
    finally:
        bar.close()
