"""Bounded concurrency with a bounded, visible queue (event-loop side; no locks needed).

At most ``slots`` requests hold a slot (a generation runs in a worker thread for each); at
most ``queue_size`` more wait, first come first served, and can read their position; beyond
that :meth:`Gate.admit` raises :class:`QueueFull` (the app answers 503). A ticket is released
exactly once, whether it ran, timed out or its client went away while waiting.
"""

from __future__ import annotations

import asyncio
from collections import deque


class QueueFull(RuntimeError):
    """Every slot is busy and the queue is full."""


class Ticket:
    """One admitted request: ``granted`` once it holds a slot."""

    def __init__(self) -> None:
        self.granted = False
        self.released = False
        self.event = asyncio.Event()


class Gate:
    """``slots`` running at once, ``queue_size`` waiting (module docstring)."""

    def __init__(self, slots: int, queue_size: int):
        if slots < 1 or queue_size < 0:
            raise ValueError(f"need slots >= 1 and queue_size >= 0, got {slots}, {queue_size}")
        self.slots, self.queue_size = slots, queue_size
        self.running = 0
        self.waiting: deque[Ticket] = deque()

    def admit(self) -> Ticket:
        """A ticket: granted at once when a slot is free, else queued; :class:`QueueFull`."""
        if self.running + len(self.waiting) >= self.slots + self.queue_size:
            raise QueueFull(f"the studio is busy: {self.running} lines are being written and "
                            f"{len(self.waiting)} wait; try again in a few seconds")
        ticket = Ticket()
        if self.running < self.slots and not self.waiting:
            self._grant(ticket)
        else:
            self.waiting.append(ticket)
        return ticket

    def position(self, ticket: Ticket) -> int:
        """1 for the first waiting ticket, 2 for the next ...; 0 once granted."""
        return 0 if ticket.granted else self.waiting.index(ticket) + 1

    async def wait(self, ticket: Ticket, poll_s: float = 0.25):
        """Yield the ticket's queue position while it waits (at once, then on every change or
        ``poll_s``), return when it holds a slot."""
        last = None
        while not ticket.granted:
            pos = self.position(ticket)
            if pos != last:
                last = pos
                yield pos
            try:
                await asyncio.wait_for(ticket.event.wait(), poll_s)
            except asyncio.TimeoutError:
                pass

    def release(self, ticket: Ticket) -> None:
        """Give the slot back (or leave the queue); the next waiting ticket gets the slot."""
        if ticket.released:
            return
        ticket.released = True
        if ticket.granted:
            self.running -= 1
        elif ticket in self.waiting:
            self.waiting.remove(ticket)
        while self.waiting and self.running < self.slots:
            self._grant(self.waiting.popleft())

    def _grant(self, ticket: Ticket) -> None:
        ticket.granted = True
        self.running += 1
        ticket.event.set()

    def state(self) -> dict:
        """Running and waiting counts (for /api/info and the load script)."""
        return {"running": self.running, "waiting": len(self.waiting), "slots": self.slots,
                "queue_size": self.queue_size}
