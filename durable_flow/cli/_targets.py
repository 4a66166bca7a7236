"""Naming a workflow on the command line: a module, a Python file, or a declarative file.

Three forms, everywhere the CLI takes a workflow (``run``, ``recover``,
``worker``, ``graph``, ``--workflow``):

* ``MODULE:NAME``: ``MODULE`` is imported with the current directory first on
  the path;
* ``PATH.py:NAME``: the file is run as a module of its own (its directory
  first on the path, as ``python PATH.py`` would have it);
* ``PATH.json`` / ``PATH.yaml`` (with ``--registry MODULE:NAME`` or
  ``PATH.py:NAME`` for the functions and agents it names): the declarative
  format of :func:`durable_flow.load_workflow`.

A run started by ``durable-flow run`` records the target (files by their
absolute path, with the registry) so that ``resume``, ``respond`` and
``fork`` find the same workflow from any directory. Like any module named on
the command line, a recorded target is imported: use trusted databases.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._support import CliError, load_object, resolve_workflow

if TYPE_CHECKING:
    from ..model._graph import Workflow

__all__ = ["DECLARATIVE_SUFFIXES", "Target", "load_file", "load_runnable", "load_target",
           "load_targets", "parse_recorded"]

DECLARATIVE_SUFFIXES = (".json", ".yaml", ".yml")
_REGISTRY_FLAG = "--registry"
_ATTRIBUTE = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")


@dataclass(frozen=True, slots=True)
class Target:
    """A workflow found from the command line, and how to find it again."""

    workflow: Workflow
    recorded: str
    """What a run started from it records (``RunInfo.workflow_ref``)."""


def load_target(target: str, registry: str | None = None,
                notes: list[str] | None = None) -> Target:
    """The workflow named by ``target`` (any of the three forms) and its recorded form."""
    path = Path(target)
    if path.suffix.lower() in DECLARATIVE_SUFFIXES:
        workflow = load_file(path, registry, notes)
        recorded = [str(path.resolve())]
        if registry is not None:
            recorded += [_REGISTRY_FLAG, _absolute(registry)]
        return Target(workflow, shlex.join(recorded))
    if registry is not None:
        raise CliError(f"--registry is for .json/.yaml workflow files, not {target!r}")
    if _is_file_ref(target):
        file, _, name = target.rpartition(":")
        obj = _file_attribute(Path(file), name)
        return Target(_as_workflow(obj, target), shlex.join([f"{Path(file).resolve()}:{name}"]))
    return Target(resolve_workflow(target), target)


def load_runnable(target: str, registry: str | None = None) -> Target:
    """Like :func:`load_target`, for a workflow about to run: every agent must be bound.

    A declarative file naming agents needs ``--registry``; without it the
    command stops here, before any run is claimed or started.
    """
    notes: list[str] = []
    found = load_target(target, registry, notes)
    if registry is None and _is_declarative(target) and notes:
        raise CliError(f"{target} names agents and functions (agent_name) that only a registry "
                       "binds: pass --registry MODULE:NAME (or file.py:NAME)")
    return found


def load_targets(targets: list[str], registry: str | None) -> list[Target]:
    """Several workflows to run (a worker's, the web UI's); the registry binds the files'."""
    if registry is not None and not any(_is_declarative(t) for t in targets):
        raise CliError("--registry is for .json/.yaml workflow files; none is given")
    return [load_runnable(t, registry if _is_declarative(t) else None) for t in targets]


def _is_declarative(target: str) -> bool:
    return Path(target).suffix.lower() in DECLARATIVE_SUFFIXES


def parse_recorded(recorded: str) -> tuple[str, str | None]:
    """Split a recorded target back into the target and its registry."""
    try:
        parts = shlex.split(recorded)
    except ValueError:
        parts = []
    if len(parts) == 3 and parts[1] == _REGISTRY_FLAG:
        return parts[0], parts[2]
    if len(parts) != 1:
        raise CliError(f"the recorded workflow {recorded!r} cannot be read; pass --workflow")
    return parts[0], None


def load_file(path: Path, registry_ref: str | None, notes: list[str] | None = None) -> Workflow:
    """Load a declarative .json/.yaml workflow; the loader's remarks go to ``notes``.

    ``registry_ref`` (``MODULE:NAME`` or ``PATH.py:NAME``) names the mapping
    of functions and agents the file refers to.
    """
    from ..building.declarative._load import load_workflow

    if not path.is_file():
        raise CliError(f"no file {path}")
    registry = load_registry(registry_ref) if registry_ref is not None else None
    return load_workflow(path, registry, notes=notes)


def load_registry(ref: str) -> Any:
    """The registry object named by ``MODULE:NAME`` or ``PATH.py:NAME``."""
    if _is_file_ref(ref):
        file, _, name = ref.rpartition(":")
        return _file_attribute(Path(file), name)
    return load_object(ref)


def _is_file_ref(ref: str) -> bool:
    file, sep, _name = ref.rpartition(":")
    return bool(sep) and file.endswith(".py")


def _absolute(ref: str) -> str:
    if _is_file_ref(ref):
        file, _, name = ref.rpartition(":")
        return f"{Path(file).resolve()}:{name}"
    return ref


def _file_attribute(path: Path, name: str) -> Any:
    """Run ``path`` as a module (once per process) and return its attribute ``name``."""
    attr = name
    if not _ATTRIBUTE.match(attr):
        raise CliError(f"{attr!r} is not an attribute name (for example {path}:workflow)")
    if not path.is_file():
        raise CliError(f"no file {path}")
    resolved = path.resolve()
    # one module per file, under a name no import statement can collide with
    module_name = "_durable_flow_file_" + hashlib.sha256(str(resolved).encode()).hexdigest()[:16]
    module = sys.modules.get(module_name)
    if module is None:
        module = _exec_file(resolved, module_name)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise CliError(f"{path} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def _exec_file(path: Path, module_name: str) -> Any:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise CliError(f"cannot load {path} as Python")
    module = importlib.util.module_from_spec(spec)
    # registered first: pydantic resolves the file's annotations through sys.modules
    sys.modules[module_name] = module
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's file raised while running
        del sys.modules[module_name]
        from ._support import describe_error

        raise CliError(f"running {path} failed: {type(exc).__name__}: "
                       f"{describe_error(exc)}") from exc
    return module


def _as_workflow(obj: Any, ref: str) -> Workflow:
    from ..building._builder import WorkflowBuilder
    from ..model._graph import Workflow

    if isinstance(obj, Workflow):
        return obj
    if isinstance(obj, WorkflowBuilder):
        raise CliError(f"{ref} is a WorkflowBuilder; point at the built workflow "
                       "(the result of builder.build())")
    raise CliError(f"{ref} is not a durable_flow Workflow (it is of type {type(obj).__name__})")
