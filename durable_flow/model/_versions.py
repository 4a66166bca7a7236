"""Workflow versions: migrations between them, and what differs between two graphs.

A run records the version of the workflow that started it. A newer version
declares how to move a paused run onto it with ``builder.migrate``; the
:class:`Migration` it records is applied by ``Runtime.resume(...,
migrate=True)``. :func:`first_difference` names the first node or edge two
graph descriptions (``Workflow.describe()``) disagree on, for
``WorkflowMismatchError``; :func:`only_new_defaults` lets a graph that only
gained state fields with defaults continue the runs of the old one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ._task_id import TaskId

if TYPE_CHECKING:
    from ._graph import Workflow

__all__ = ["Migration", "first_difference", "only_new_defaults"]


@dataclass(frozen=True, slots=True)
class Migration:
    """How a run of ``from_version`` moves onto the version that declares it.

    ``fn`` gets the run's blackboard values (a plain dict) and returns the
    new version's values; ``nodes`` maps node ids of the old version to
    their new ids (for the next tasks and the pending requests).
    """

    from_version: str
    fn: Callable[[dict[str, Any]], Mapping[str, Any]]
    nodes: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def node(self, old: str) -> str:
        """The new id of node ``old`` (itself when it was not renamed)."""
        return self.nodes.get(old, old)

    def task(self, old: str) -> str:
        """The new id of the stored task id ``old``: its node renamed, an instance keeping its index."""
        return str(TaskId.parse(old).renamed(self.nodes))


def first_difference(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """The first node, edge or other part where two graph descriptions differ, or None.

    ``old`` is the run's graph, ``new`` the workflow given; the answer reads
    as "node 'x' is only in the run's graph", "edge a -> b ...", and so on.
    """
    for check in (_fields, _nodes, _edges, _switches, _fan_ins, _ends):
        found = check(old, new)
        if found:
            return found
    return None


def only_new_defaults(old: Mapping[str, Any], workflow: Workflow) -> bool:
    """Whether ``workflow`` differs from the run's graph ``old`` only by new defaulted fields.

    New state fields with defaults, at any nesting level: it can continue the run as it is.

    A checkpoint written before such a field existed holds no value for it;
    the field's default applies when it is read, as for a new run.
    """
    return _fields_only(old, workflow.describe(), workflow)


def _fields_only(old: Mapping[str, Any], new: Mapping[str, Any], wf: Workflow) -> bool:
    added = set(new.get("fields", ())) - set(old.get("fields", ()))
    if set(old.get("fields", ())) - set(new.get("fields", ())):
        return False
    if any(wf.state.model_fields[name].is_required() for name in added
           if name in wf.state.model_fields):
        return False
    if _without_fields(old) != _without_fields(new):
        return False
    for nid, spec in wf.nodes.items():
        if spec.subworkflow is not None and not _fields_only(
                old["nodes"][nid]["workflow"], new["nodes"][nid]["workflow"],
                spec.subworkflow.workflow):
            return False
    return True


def _without_fields(description: Mapping[str, Any]) -> dict[str, Any]:
    """The description without any level's ``fields`` (nested workflows included)."""
    out = {k: v for k, v in description.items() if k != "fields"}
    out["nodes"] = {nid: {**node, "workflow": _without_fields(node["workflow"])}
                    if "workflow" in node else node
                    for nid, node in description.get("nodes", {}).items()}
    return out


def _only(name: str, in_old: bool) -> str:
    return f"{name} is only in the run's graph" if in_old else \
        f"{name} is only in the workflow given"


def _fields(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    a, b = set(old.get("fields", ())), set(new.get("fields", ()))
    for name in sorted(a ^ b):
        return _only(f"state field {name!r}", name in a)
    return None


def _nodes(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    a, b = old.get("nodes", {}), new.get("nodes", {})
    for nid in sorted(set(a) | set(b)):
        if nid not in a or nid not in b:
            return _only(f"node {nid!r}", nid in a)
        if a[nid] != b[nid]:
            parts = sorted(k for k in set(a[nid]) | set(b[nid]) if a[nid].get(k) != b[nid].get(k))
            inner = None
            if "workflow" in parts:
                inner = first_difference(a[nid].get("workflow", {}), b[nid].get("workflow", {}))
            detail = f" (inside: {inner})" if inner else f" ({', '.join(parts)})"
            return f"node {nid!r} changed{detail}"
    return None


def _edge_name(edge: list[Any]) -> str:
    source, target, when = edge
    return f"edge {source} -> {target}" + (f" when {when!r}" if when else "")


def _edges(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    a = [tuple(e) for e in old.get("edges", ())]
    b = [tuple(e) for e in new.get("edges", ())]
    for edge in a:
        if edge not in b:
            return _only(_edge_name(list(edge)), True)
    for edge in b:
        if edge not in a:
            return _only(_edge_name(list(edge)), False)
    return None


def _switches(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    a = {s[0]: s for s in old.get("switches", ())}
    b = {s[0]: s for s in new.get("switches", ())}
    for source in sorted(set(a) | set(b)):
        if a.get(source) != b.get(source):
            return f"the switch on node {source!r} differs"
    return None


def _fan_ins(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    a = {f[1]: sorted(f[0]) for f in old.get("fan_ins", ())}
    b = {f[1]: sorted(f[0]) for f in new.get("fan_ins", ())}
    for target in sorted(set(a) | set(b)):
        if a.get(target) != b.get(target):
            return f"the fan-in into node {target!r} differs"
    return None


def _ends(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    if old.get("entry") != new.get("entry"):
        return f"the entry is {old.get('entry')!r} in the run's graph, " \
               f"{new.get('entry')!r} in the workflow given"
    if old.get("exits") != new.get("exits"):
        return "the exits differ"
    if old.get("name") != new.get("name"):
        return f"the workflow is named {old.get('name')!r} in the run's graph"
    return None
