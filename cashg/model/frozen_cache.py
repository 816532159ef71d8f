"""Outputs of a frozen module kept by key: the text backbone's states of a code point or of a
short text are computed once per training run instead of once per batch.

A frozen CANINE is a fixed function of its input, so its states of one code point (the
character-identity path, paper Sec. 3.1) or of a text (the context path: a one- or
two-character text of the char and bigram streams; on a GPU also a sentence,
:class:`TextStates`) never change while it stays frozen. Each key is computed ALONE
(a batch of one), so a cached value does not depend on which batch first asked for it, and a
run resumed from a checkpoint (an empty cache) computes the same values an uninterrupted run
had cached: exact resume holds.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import torch

from cashg.model.device import host_to


class RowCache:
    """Rows of fixed shape by hashable key, in one table (so a lookup is one index_select).

    ``max_rows`` bounds the memory: when a lookup's new keys would exceed it the table starts
    empty again (values are recomputed identically, see the module docstring)."""

    def __init__(self, max_rows: int = 65536):
        self.max_rows = max_rows
        self.index: dict[Hashable, int] = {}
        self.table: torch.Tensor | None = None  # (capacity, *row shape)

    def __len__(self) -> int:
        return len(self.index)

    def clear(self) -> None:
        self.index.clear()
        self.table = None

    def rows(self, keys: Sequence[Hashable],
             compute: Callable[[Hashable], torch.Tensor]) -> torch.Tensor:
        """(K, *row shape): the row of every key, ``compute(key)`` for the ones not cached."""
        missing = [k for k in dict.fromkeys(keys) if k not in self.index]
        if len(self.index) + len(missing) > self.max_rows:
            self.clear()
            missing = list(dict.fromkeys(keys))
        for k in missing:
            self._append(k, compute(k).detach())
        idx = host_to(torch.tensor([self.index[k] for k in keys]), self.table.device)
        return self.table.index_select(0, idx)

    def _append(self, key: Hashable, row: torch.Tensor) -> None:
        n = len(self.index)
        if self.table is None or n == self.table.shape[0]:
            grown = row.new_empty((max(64, 2 * n), *row.shape))
            if self.table is not None:
                grown[:n] = self.table[:n]
            self.table = grown
        self.table[n] = row
        self.index[key] = n


class TextStates:
    """Variable-length rows ((n, H) states of a text of n characters) by key, each kept as
    its own tensor; ``max_bytes`` bounds the memory (the cache starts empty again when a
    lookup's new rows would exceed it; values are recomputed identically)."""

    def __init__(self, max_bytes: int = 1 << 30):
        self.max_bytes = max_bytes
        self.states: dict[Hashable, torch.Tensor] = {}
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self.states)

    def rows(self, keys: Sequence[Hashable],
             compute: Callable[[Hashable], torch.Tensor]) -> list[torch.Tensor]:
        """The states of every key, ``compute(key)`` for the ones not kept."""
        missing = [k for k in dict.fromkeys(keys) if k not in self.states]
        new = {k: compute(k).detach() for k in missing}
        size = sum(v.numel() * v.element_size() for v in new.values())
        if self.nbytes + size > self.max_bytes:
            self.states = {k: v for k, v in self.states.items() if k in keys}
            self.nbytes = sum(v.numel() * v.element_size() for v in self.states.values())
        self.states.update(new)
        self.nbytes += size
        return [self.states[k] for k in keys]
