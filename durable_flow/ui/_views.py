"""Shaping records for display: JSON text, diffs, the sub-workflow tree, the marked graph.

Nothing here escapes HTML: the templates do, always (autoescape), so a value
is text wherever it came from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from ..building._diagram import to_mermaid
from ..model._approvals import ROLE_PREFIX, Principal, permits
from ..model._decisions import Decision
from ..model._graph import Workflow
from ..model._records import PendingRequest, RunStatus
from ..model._task_id import TaskId

__all__ = [
    "Change",
    "DecisionLine",
    "TreeNode",
    "decision_line",
    "diff_values",
    "field_label",
    "marked_mermaid",
    "namespace_tree",
    "next_step",
    "plain",
    "pretty",
    "short_time",
    "subworkflow_at",
    "verdict",
    "visible",
]

def plain(value: Any) -> Any:
    """A value as plain JSON types (pydantic models by their JSON dump)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return to_jsonable_python(value, fallback=repr)


def pretty(value: Any) -> str:
    """Indented JSON text of any value (a string stays quoted, so types stay visible)."""
    return orjson.dumps(value, default=plain,
                        option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()


def field_label(key: str) -> str:
    """A payload key as a label: ``cost_center`` reads "Cost center"."""
    words = str(key).replace("_", " ").strip()
    return words[:1].upper() + words[1:] if words else str(key)


def verdict(answer: Any) -> str:
    """The words that open an answer's outcome: approved, rejected, or recorded.

    A yes/no answer, or an answer whose one yes/no field says it (``approved``),
    is an approval or a rejection.
    """
    if isinstance(answer, Mapping):
        flags = [v for k, v in answer.items()
                 if isinstance(v, bool) and str(k).lower() in _APPROVAL_KEYS]
        answer = flags[0] if len(flags) == 1 else None
    if answer is True:
        return "Approved."
    if answer is False:
        return "Rejected."
    return "Your answer is recorded."


_APPROVAL_KEYS = ("approved", "approve", "accept", "accepted", "ok", "yes")


def next_step(status: RunStatus, continues_here: bool, workflow: str) -> str:
    """What happens to the run after an answer, in plain words."""
    if status is RunStatus.QUEUED:
        return ("The run goes on now." if continues_here else
                f"The run goes on as soon as the service that runs {workflow} picks it up.")
    return {RunStatus.RUNNING: "The run takes your answer at its next step.",
            RunStatus.WAITING: "The run now waits for another answer.",
            RunStatus.COMPLETED: "The run is finished.",
            RunStatus.CANCELLED: "The run was cancelled."}.get(
        status, f"The run is {status.value}.")


def short_time(at: datetime | None) -> str:
    """``2024-05-01 12:00:03 UTC``, or an empty string."""
    return "" if at is None else at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclass(frozen=True, slots=True)
class Change:
    """How one blackboard field differs between two checkpoints."""

    field: str
    kind: str  # added, removed, changed, appended
    before: Any = None
    after: Any = None


def diff_values(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """The fields that differ, in field order; a list that only grew shows its new items."""
    changes: list[Change] = []
    for key in [*old, *(k for k in new if k not in old)]:
        if key not in new:
            changes.append(Change(key, "removed", before=old[key]))
        elif key not in old:
            changes.append(Change(key, "added", after=new[key]))
        elif old[key] != new[key]:
            before, after = old[key], new[key]
            if isinstance(before, list) and isinstance(after, list) \
                    and len(after) > len(before) and after[:len(before)] == before:
                changes.append(Change(key, "appended", before=before, after=after[len(before):]))
            else:
                changes.append(Change(key, "changed", before=before, after=after))
    return changes


@dataclass(slots=True)
class TreeNode:
    """A sub-workflow (or ``Send`` instance) namespace in a run's tree."""

    namespace: str
    name: str
    status: RunStatus | None
    children: list[TreeNode] = field(default_factory=list)


def namespace_tree(namespaces: Mapping[str, RunStatus]) -> TreeNode:
    """The run's namespaces as a tree under the top level (``review.legal`` under ``review``).

    Instance paths such as ``review[2]`` are shown as given; a namespace whose
    parent has no checkpoints of its own still hangs under it.
    """
    root = TreeNode("", "(top level)", None)
    nodes = {"": root}
    for ns in sorted(namespaces, key=lambda n: n.count(".")):
        parent_ns, _, name = ns.rpartition(".")
        parent = nodes.get(parent_ns) or _ensure(nodes, parent_ns)
        node = nodes[ns] = TreeNode(ns, name, namespaces[ns])
        parent.children.append(node)
    return root


def _ensure(nodes: dict[str, TreeNode], ns: str) -> TreeNode:
    parent_ns, _, name = ns.rpartition(".")
    parent = nodes.get(parent_ns) or _ensure(nodes, parent_ns)
    node = nodes[ns] = TreeNode(ns, name, None)
    parent.children.append(node)
    return node


def subworkflow_at(workflow: Workflow, namespace: str) -> Workflow | None:
    """The workflow running in ``namespace`` (``review[2].legal``), or None if not found."""
    current = workflow
    for part in filter(None, namespace.split(".")):
        spec = current.nodes.get(TaskId.parse(part).node)
        if spec is None or spec.subworkflow is None:
            return None
        current = spec.subworkflow.workflow
    return current


def marked_mermaid(workflow: Workflow, current: Iterable[str],
                   parked: Iterable[str] = ()) -> str:
    """The workflow's Mermaid flowchart with the ``current`` and ``parked`` nodes marked.

    Node ids in the chart follow the workflow's node order (``n0``, ``n1``,
    ...), as ``to_mermaid`` writes them; qualified paths and instance
    suffixes are reduced to the node of this workflow. A parked node (a task
    waiting while its run goes on, ``waits="branch"``) is drawn dashed in
    its own colour, and not as current.
    """
    ids = {node: f"n{i}" for i, node in enumerate(workflow.nodes)}
    waiting = _chart_ids(ids, parked)
    marked = _chart_ids(ids, current) - waiting
    # the start and end points as small stadiums: the vendored renderer draws
    # labelled circles several times larger than the nodes
    chart = to_mermaid(workflow).replace('(("start"))', '(["start"])').replace(
        '(("end"))', '(["end"])')
    lines = [chart.rstrip("\n")]
    if marked:
        lines.append("    classDef current fill:#ffd166,stroke:#b45309,stroke-width:3px")
        lines.extend(f"    class {m} current" for m in sorted(marked))
    if waiting:
        lines.append("    classDef parked fill:#e0e7ff,stroke:#4338ca,stroke-width:3px,"
                     "stroke-dasharray:6 3")
        lines.extend(f"    class {m} parked" for m in sorted(waiting))
    return "\n".join(lines) + "\n"


def _chart_ids(ids: Mapping[str, str], tasks: Iterable[str]) -> set[str]:
    """The chart ids of the nodes ``tasks`` name (``review[2].legal`` is ``review``)."""
    return {ids[n] for n in (TaskId.parse(t.split(".", 1)[0]).node for t in tasks) if n in ids}


def visible(requests: Sequence[PendingRequest], person: Principal | None,
            tab: str) -> list[PendingRequest]:
    """The requests a person may answer: ``mine`` (asked of them or their roles) or ``all``.

    ``all`` is everything for the admin (``person`` None) and, for a person,
    theirs plus the unassigned ones (the inbox's ``all`` tab shows more: every
    request of the runs they may read, see ``_doors.inbox_filter``).
    """
    if person is None:
        return [r for r in requests if tab != "mine" or not (r.assignees or r.roles)]
    theirs = [r for r in requests if permits(person, r.assignees, r.roles)]
    return [r for r in theirs if r.assignees or r.roles] if tab == "mine" else theirs


@dataclass(frozen=True, slots=True)
class DecisionLine:
    """One decision of a run's audit trail in plain words (the raw record kept beside it)."""

    decision: Decision
    who: str
    """Who decided: a person's id, "policy NAME", or "automatic" for the runtime."""
    what: str
    """What happened, in a sentence: 'Approved "Approve 900 EUR for erik?" in the web app'."""
    fields: list[tuple[str, Any]]
    """The answer's other fields as (label, value) rows (a yes/no is said in ``what``)."""

    @property
    def raw(self) -> dict[str, Any]:
        """The record as stored, for engineers (``durable-flow audit RUN --json`` prints it)."""
        return {**self.decision.body(), "digest": self.decision.digest}


# how an act came, where that says something to the person reading (an API call does not)
_VIA = {"cli": "from the command line", "ui": "in the web app", "link": "from a signed link"}

_RUN_ACTS = {"cancel": "Cancelled the run", "fork": "Started this run as a copy of another",
             "update": "Changed the run's data", "pause": "Paused the run",
             "unpause": "Let the paused run go on", "import": "Brought the run in from an export"}


def decision_line(d: Decision, titles: Mapping[str, str]) -> DecisionLine:
    """``d`` in words; ``titles`` holds the run's request titles by request id."""
    title = titles.get(d.request_id) or (f"the request of step {d.node}" if d.node else "")
    asked = f"\u201c{title}\u201d"
    via = _VIA.get(d.via)
    how = f" {via}" if via else ""
    if d.by is None:
        who = "automatic" if d.via in ("runtime", "policy") else "someone not signed in"
    elif d.by.startswith("policy:"):
        who = "policy " + d.by.removeprefix("policy:")
    else:
        who = d.by
    fields: list[tuple[str, Any]] = []
    if d.kind in ("answer", "policy"):
        said = verdict(d.answer)
        verb = {"Approved.": "Approved", "Rejected.": "Rejected"}.get(said, "Answered")
        fields = _answer_fields(d.answer, flagged=verb != "Answered")
        what = f"{verb} {asked}" + (" automatically, by a rule of the workflow"
                                    if d.kind == "policy" else how)
    elif d.kind in ("escalation", "reassign"):
        whom = _targets(d.answer)
        what = (f"Nobody answered {asked} by its deadline: passed on to {whom}"
                if d.kind == "escalation" else f"Gave {asked} to {whom}{how}")
    elif d.kind == "timeout":
        what = f"Nobody answered {asked} by its deadline: it closed without an answer"
    elif d.kind == "withdrawn":
        what = f"Withdrew {asked}: the run finished without needing the answer"
    else:
        what = _RUN_ACTS.get(d.kind, f"{d.kind.capitalize()} the run") + how
        fields = _answer_fields(d.answer, flagged=False)
    return DecisionLine(d, who, what, fields)


def _targets(answer: Any) -> str:
    """Whom an escalation or reassignment names: "mia, role manager" (or "nobody")."""
    if not isinstance(answer, Mapping):
        return "nobody"
    people = [str(p) for p in answer.get("assignees") or ()]
    roles = [f"role {str(r).removeprefix(ROLE_PREFIX)}" for r in answer.get("roles") or ()]
    return ", ".join([*people, *roles]) or "nobody"


def _answer_fields(answer: Any, *, flagged: bool) -> list[tuple[str, Any]]:
    """An answer as (label, value) rows, without the yes/no the verb says nor empty fields."""
    if answer is None or (flagged and isinstance(answer, bool)):
        return []
    if not isinstance(answer, Mapping):
        return [("Answer", answer)]
    return [(field_label(k), v) for k, v in answer.items()
            if v not in (None, "")  # a field left empty says nothing
            and not (flagged and isinstance(v, bool) and str(k).lower() in _APPROVAL_KEYS)]
