"""The memory store's decisions: each run's chain kept in a list (the SQL base has a table).

Until the memory store runs on the SQL base this mixin keeps it to the same
rules: the same permission check and the same sealed records, written with
the answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from ..model._decisions import Decision, seal
from ._approval_rows import Answerer, DecisionDraft, check_permitted, decision_for
from ._rows import RequestRow, check_answerable

__all__ = ["MemoryDecisions"]


class MemoryDecisions:
    """Each run's decisions, oldest first (a mixin of ``MemoryStore``)."""

    _chains: dict[str, list[Decision]]
    _requests: dict[tuple[str, str], RequestRow]

    def _new_answers(self, run_id: str, answers: Mapping[str, bytes], now: datetime,
                     answerer: Answerer | None = None) -> dict[str, bytes]:
        """The answers to record (open, within their deadline; repeats skipped), chained as decisions."""
        new = {rid: answer for rid, answer in answers.items()
               if check_answerable(run_id, rid, self._requests.get((run_id, rid)), answer, now)}
        self._chain(run_id, [self._requests[(run_id, rid)] for rid in new], new, answerer, now)
        return new

    def _chain(self, run_id: str, rows: Sequence[RequestRow], answers: Mapping[str, bytes],
               answerer: Answerer | None, now: datetime) -> None:
        """Check ``answerer`` may answer every row (``NotAuthorizedError``), then chain one each."""
        for row in rows:
            check_permitted(run_id, row, answerer)
        self._append(run_id, [decision_for(row, answers[row.id], answerer, now) for row in rows])

    def _append(self, run_id: str, drafts: Sequence[DecisionDraft]) -> None:
        """Seal ``drafts`` onto the run's chain, each after the one before."""
        if not hasattr(self, "_chains"):
            self._chains = {}
        chain = self._chains.setdefault(run_id, [])
        for draft in drafts:
            previous = chain[-1].digest if chain else ""
            chain.append(seal(previous, run_id, len(chain) + 1, draft.request_id, draft.node, draft.kind,
                              answer=draft.answer, by=draft.by, via=draft.via, at=draft.at,
                              comment=draft.comment, payload=draft.payload))

    async def decisions(self, run_id: str) -> list[Decision]:
        """A run's decisions, oldest first."""
        return list(getattr(self, "_chains", {}).get(run_id, ()))
