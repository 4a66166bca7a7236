"""Failed logins slowed, then refused: ``LoginThrottle``.

Each failed login counts against its user name and its client address (a
moving window kept by the ``limits`` library, in this process): after 5
failures in 15 minutes for either, the login form answers 429 with
``Retry-After`` until the oldest failure leaves the window, whatever the
password. Before that each failure waits a little longer than the last. A
successful login clears its name's count.
"""

from __future__ import annotations

import asyncio
import math
import time

from limits import RateLimitItemPerMinute
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

__all__ = ["FAILURES", "WINDOW_MINUTES", "LoginThrottle"]

FAILURES = 5
"""Failed logins allowed in the window, per user name and per client."""
WINDOW_MINUTES = 15
"""The window the failures are counted in."""
_STEP = 0.2  # seconds added to each failed answer per failure already counted


class LoginThrottle:
    """Counts failed logins per user name and per client; says when to refuse."""

    def __init__(self, failures: int = FAILURES, window_minutes: int = WINDOW_MINUTES) -> None:
        self._item = RateLimitItemPerMinute(failures, window_minutes)
        self._limiter = MovingWindowRateLimiter(MemoryStorage())

    @staticmethod
    def keys(name: str | None, client: str | None) -> list[str]:
        """The counters a login attempt belongs to."""
        found = [f"client:{client or '?'}"]
        if name:
            found.append(f"name:{name.casefold()}")
        return found

    def retry_after(self, keys: list[str]) -> int | None:
        """Seconds until a login may be tried again, or None when it may be tried now."""
        waits = [self._limiter.get_window_stats(self._item, key).reset_time - time.time()
                 for key in keys if not self._limiter.test(self._item, key)]
        return max(1, math.ceil(max(waits))) if waits else None

    async def failed(self, keys: list[str]) -> None:
        """Count a failed login, and slow its answer by the failures counted before it."""
        before = max(self._item.amount - self._limiter.get_window_stats(self._item, key).remaining
                     for key in keys)
        for key in keys:
            self._limiter.hit(self._item, key)
        if before:
            await asyncio.sleep(_STEP * before)

    def succeeded(self, name: str) -> None:
        """A login with this name succeeded: its name's failures are forgotten."""
        self._limiter.clear(self._item, f"name:{name.casefold()}")
