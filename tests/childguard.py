"""The process markers, kept true: a test that starts a child process says so.

The markers (registered in pyproject.toml):

* ``process``: starts a child process of any kind (a CLI subprocess, a child
  interpreter, a ``durable-flow ui`` server, a benchmark script, ``git``);
* ``crash``: SIGKILLs a child process (``assert_crash_safe`` included);
* ``fleet``: runs several worker processes at once, or restarts a server;
* ``browser``: drives headless Chromium.

``crash``, ``fleet`` and ``browser`` imply ``process`` (added at collection),
so ``-m "not process"`` leaves all of them out: that is ``make test-fast``.

While an unmarked test runs (its setup, call and teardown, fixtures of any
scope included), starting a child process raises :class:`UnmarkedChildProcess`;
and the test fails at its teardown even if something swallowed that error.
So a test that starts a process cannot lose its marker unnoticed.
"""

from __future__ import annotations

import _posixsubprocess
import os
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest

#: The markers that mean "starts child processes"; each implies ``process``.
PROCESS_MARKERS = ("process", "crash", "fleet", "browser")

_attempts = pytest.StashKey[list[str]]()


class UnmarkedChildProcess(RuntimeError):
    """A test without a process marker started a child process."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.get_closest_marker(m) for m in PROCESS_MARKERS[1:]):
            item.add_marker(pytest.mark.process)


def _spawners() -> list[tuple[Any, str]]:
    """Every way to start a process that the tests or the libraries they use may take."""
    return [(subprocess.Popen, "_execute_child"),  # subprocess.run, asyncio, playwright
            (_posixsubprocess, "fork_exec"),  # multiprocessing's spawn and forkserver
            (os, "fork"), (os, "forkpty"), (os, "posix_spawn"), (os, "posix_spawnp"),
            (os, "system")]


def _refusing(name: str, attempts: list[str]) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(name)
        raise UnmarkedChildProcess(
            f"this test started a child process ({name}) but has no process marker: "
            "mark it @pytest.mark.process (or crash, fleet, browser)")
    return refuse


#: while an unmarked test's phase runs: the refusal that :func:`starting` raises
_refusal: list[Callable[..., Any]] = []


def starting(what: str) -> None:
    """Say that a child process is about to start in a way no patched function sees.

    (``forkrun`` asks a fork server started earlier for its children.) Raises
    :class:`UnmarkedChildProcess` in an unmarked test, like every other way.
    """
    if _refusal:
        _refusal[0](what)


def _guarded(item: pytest.Item) -> Iterator[None]:
    """Refuse child processes while an unmarked test's phase runs."""
    if item.get_closest_marker("process"):
        yield
        return
    attempts = item.stash.setdefault(_attempts, [])
    saved = [(owner, attr, getattr(owner, attr)) for owner, attr in _spawners()
             if hasattr(owner, attr)]
    for owner, attr, _ in saved:
        setattr(owner, attr, _refusing(f"{owner.__name__}.{attr}", attempts))
    _refusal.append(lambda what: _refusing(what, attempts)())
    try:
        yield
    finally:
        _refusal.clear()
        for owner, attr, original in saved:
            setattr(owner, attr, original)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    yield from _guarded(item)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    yield from _guarded(item)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield from _guarded(item)
    if item.stash.get(_attempts, None):
        pytest.fail(f"{item.nodeid} started child processes without a process marker: "
                    f"{item.stash[_attempts]}", pytrace=False)
