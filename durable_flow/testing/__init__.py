"""Helpers for the tests users write: a scripted chat model, the memory store, crash tests.

``ScriptedModel`` answers from a list (one reply per call, in order) or from
a function of the messages, and records every call it receives::

    model = ScriptedModel(["first answer", "second answer"])
    ...
    assert model.calls[0].messages[-1].content == "the question"

``assert_crash_safe(workflow, input)`` kills a run of the workflow with
SIGKILL right after each of its durable points, resumes it, and fails
unless every resumed run ends as an uninterrupted one did and no recorded
step or saved task ran again (see "Testing your workflows" in the guide).
"""

import importlib as _importlib
import typing as _typing

# public name -> the module that defines it (imported on first use, so the
# crash tests' child processes, which live in this package, start quickly)
_EXPORTS: dict[str, str] = {
    "CrashSafetyError": "._crash",
    "MemoryStore": "..store.memory._memory",
    "ScriptedCall": "._scripted",
    "ScriptedModel": "._scripted",
    "assert_crash_safe": "._crash",
}

if _typing.TYPE_CHECKING:
    from ..store.memory._memory import MemoryStore
    from ._crash import CrashSafetyError, assert_crash_safe
    from ._scripted import ScriptedCall, ScriptedModel

__all__ = ["CrashSafetyError", "MemoryStore", "ScriptedCall", "ScriptedModel", "assert_crash_safe"]


def __getattr__(name: str) -> _typing.Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
