"""The web inbox shows a tool call a person approves as a form: the tool, each argument, editable."""

from __future__ import annotations

import re
from urllib.parse import urlparse

from agents.test_tool_approval import desk

from durable_flow import RunStatus, Runtime
from durable_flow.model._effects import arguments_digest
from ui.test_ui_approvals import SECRET, Stores, app_on, path_of


async def test_the_approval_page_shows_each_argument_and_runs_the_edited_call(
        rt: Runtime, store_factory: Stores) -> None:
    refunds: list[tuple[str, int]] = []
    wf = desk(refunds)
    r = await rt.run(wf, {"question": "refund A-7"}, run_id="t1")
    [req] = r.pending_requests
    url = await rt.approval_link("t1", req.id, for_="fay", base_url="http://inbox", secret=SECRET)
    async with app_on(store_factory()) as client:
        page = await client.get(path_of(url))
        assert page.status_code == 200
        assert "<h1>Approve refund</h1>" in page.text
        assert "<th>Tool</th><td>refund</td>" in page.text
        order = re.search(r'name="answer/arguments/order" type="text" value="([^"]*)"', page.text)
        amount = re.search(r'name="answer/arguments/amount" type="text" value="([^"]*)"', page.text)
        assert order and amount and (order.group(1), amount.group(1)) == ("A-7", "40")
        assert "arguments_digest" not in page.text  # filled in by the runtime, not by a person
        csrf = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
        token = re.search(r'name="token" value="([^"]+)"', page.text)
        assert csrf and token
        done = await client.post(urlparse(url).path, data={
            "csrf_token": csrf.group(1), "token": token.group(1), "answer/approve": "true",
            "answer/arguments/order": "A-7", "answer/arguments/amount": "25",
            "answer/comment": "", "comment": "half of it"})
        assert done.status_code == 200, done.text
    r = await rt.resume(wf, "t1")
    assert r.status is RunStatus.COMPLETED and refunds == [("A-7", 25)]
    [decision] = [d for d in await rt.decisions("t1") if d.kind == "answer"]
    assert (decision.by, decision.via, decision.comment) == ("fay", "link", "half of it")
    assert decision.answer["arguments_digest"] == arguments_digest({"order": "A-7", "amount": 25})
