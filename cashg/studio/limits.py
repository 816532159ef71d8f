"""The bounds of ``cashg studio``: what one request may ask and how much work runs at once.

Every bound is a field with its default here (docs/studio.md lists them); the command's flags
override the concurrency ones. Requests beyond a bound get a 4xx JSON answer naming it, a full
queue a 503, so no input can make the server hang, run out of memory or answer 5xx.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Limits:
    """Bounds of one studio server.

    ``max_text_chars``: characters of the text to write; ``max_boxes``: drawn glyph boxes;
    ``max_points``: drawn points over all boxes; ``max_body_bytes``: request body, enforced
    while it is read (before JSON parsing); ``concurrency``: generations running at once (one
    worker thread each); ``queue_size``: requests waiting for a slot beyond those (a full queue
    answers 503); ``timeout_s``: wall-clock limit of one request, queue wait included (then the
    sampling stops and the stream ends with an error event); ``max_char_points``: points per
    generated character at most (the sampler's cap); ``kept_lines``: finished lines kept for
    download (oldest dropped first); ``flush_s``: the streaming interval (points are sent in
    batches at most this far apart).
    """

    max_text_chars: int = 80
    max_boxes: int = 8
    max_points: int = 4000
    max_body_bytes: int = 256 * 1024
    concurrency: int = 2
    queue_size: int = 8
    timeout_s: float = 30.0
    max_char_points: int = 100
    kept_lines: int = 64
    flush_s: float = 0.05

    def public(self) -> dict:
        """The bounds as plain JSON (the page shows them and checks input before sending)."""
        return asdict(self)
