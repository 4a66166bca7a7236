"""What an execution that holds a run's lease obeys: its local deadline, and a hand-back.

The local deadline of a held lease: a run stops itself before anyone may take it over.

A lease in the store expires ``lease_ttl`` seconds after the transaction
that took or renewed it; another process may claim the run after that. The
process holding the run cannot rely on hearing about it (its connection may
be stalled, its VM paused), so it keeps its own clock: the lease counts from
the moment the holder *sent* its last successful claim or renewal, and once
``lease_ttl`` less a safety margin has passed with no newer success, the
holder cancels the run's tasks, starts no ``ctx.step`` and commits nothing.
Its deadline always falls before the earliest moment another process may
take over, so two executions of one run never overlap.

A hand-back: a worker that stops lets the superstep in flight finish and
commit, then starts no other one; the run goes back to the queue.
"""

from __future__ import annotations

import time

__all__ = ["LOCAL_EXPIRY", "HandBack", "LeaseClock", "default_margin"]

#: The ``LeaseLostError.reason`` of a lease this process gave up by its own clock.
LOCAL_EXPIRY = "its lease ran out here before a renewal reached the store"


def default_margin(ttl: float) -> float:
    """The safety margin kept before a lease's expiry: a fifth of it, at most 10 s.

    It covers the skew between this machine's clock and the others', and the
    time the run's tasks take to stop once they are cancelled.
    """
    return min(ttl / 5, 10.0)


class LeaseClock:
    """When the lease held by this process stops being safe to act on.

    Times are ``time.monotonic()`` readings: a wall clock stepped by NTP
    moves no deadline.
    """

    __slots__ = ("_deadline", "margin", "ttl")

    def __init__(self, ttl: float, sent_at: float, margin: float | None = None) -> None:
        self.ttl = ttl
        self.margin = default_margin(ttl) if margin is None else margin
        self._deadline = sent_at + ttl - self.margin

    def renewed(self, sent_at: float) -> None:
        """A renewal sent at ``sent_at`` succeeded: the deadline moves on (never back)."""
        self._deadline = max(self._deadline, sent_at + self.ttl - self.margin)

    @property
    def deadline(self) -> float:
        """The monotonic time past which the holder must not act."""
        return self._deadline

    def remaining(self) -> float:
        """Seconds left before the deadline (negative once it passed)."""
        return self._deadline - time.monotonic()

    def expired(self) -> bool:
        """True once the deadline passed."""
        return time.monotonic() >= self._deadline


class HandBack(BaseException):
    """Raised between supersteps of an execution asked to stop: the run is given back.

    A ``BaseException``, so user code cannot swallow it. Nothing is lost: the
    last superstep committed, and whoever claims the run next continues from
    its head.
    """
