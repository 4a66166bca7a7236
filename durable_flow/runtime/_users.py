"""The earlier import path of the user directory, kept for scripts that use it.

The directory lives in ``runtime/people/_users.py``; this module only re-exports it.
"""

from __future__ import annotations

from .people._users import Users

__all__ = ["Users"]
