"""torchrun-style data parallelism on CPU (gloo, 2 processes): ranks stay in sync."""

from __future__ import annotations

import dataclasses
import os
import socket

import pytest
import torch
import torch.multiprocessing as mp
from test_training import TINY_TRAIN

from cashg.model.presets import TINY


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, data: str, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world),
                      RANK=str(rank), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    from pathlib import Path

    from cashg.training import checkpoint as ck
    from cashg.training.cli import open_data
    from cashg.training.distributed import shutdown
    from cashg.training.trainer import RunOptions, Trainer

    cfg = dataclasses.replace(TINY_TRAIN, total_iters=6, checkpoint_interval=3, eval_interval=6)
    train, val, _, files = open_data(Path(data), cfg, cache=True)
    trainer = Trainer(TINY, cfg, train, Path(out), RunOptions(device="cpu", track=False,
                      progress=False), val_data=val, data_fingerprint=ck.data_fingerprint(files))
    init = {k: v.clone() for k, v in trainer.model.named_parameters()}
    res = trainer.run()
    final = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    torch.save({"init": init, "final": final, "status": res.status}, Path(out) / f"rank{rank}.pt")
    shutdown()


def test_two_gloo_ranks_stay_in_sync(subsets, tmp_path):
    mp.spawn(_worker, args=(2, _free_port(), str(subsets), str(tmp_path)), nprocs=2, join=True)
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2))
    assert r0["status"] == r1["status"] == "completed"
    changed = [k for k in r0["final"] if not torch.equal(r0["final"][k], r0["init"][k])]
    assert changed, "training did not update any parameter"
    for k in r0["final"]:
        assert torch.equal(r0["final"][k], r1["final"][k]), k
    ckpts = sorted(p.name for p in (tmp_path / "checkpoints").glob("*/ckpt-*.pt"))
    assert ckpts == ["ckpt-00000003.pt", "ckpt-00000006.pt"]
    extra = torch.load(next((tmp_path / "checkpoints").glob("*/ckpt-00000006.pt")),
                       weights_only=True)["extra"]
    assert len(extra["rng"]) == 2  # every rank's random state, for exact resume


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])
