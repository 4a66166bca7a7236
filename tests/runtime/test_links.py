from __future__ import annotations

import time
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest

from durable_flow import InvalidInputError, InvalidLinkError
from durable_flow.runtime.people._links import LinkSigner, parse_duration


def _token(url: str) -> str:
    return parse_qs(urlsplit(url).query)["token"][0]


def test_a_link_binds_run_request_principal_and_expiry():
    signer = LinkSigner("s3cret")
    url = signer.url("https://approve.example.com/", "run-1", "approve@1#0", "alice", timedelta(hours=1))
    assert url.startswith("https://approve.example.com/approve/run-1/approve%401%230?token=")
    grant = signer.check(_token(url), "run-1", "approve@1#0")
    assert (grant.run_id, grant.request_id, grant.principal) == ("run-1", "approve@1#0", "alice")
    assert grant.expires_at == pytest.approx(time.time() + 3600, abs=5)


@pytest.mark.parametrize("reason", ["altered", "expired", "foreign", "other-secret"])
def test_every_wrong_link_is_refused_with_its_reason(reason):
    signer = LinkSigner("s3cret")
    token = signer.token("run-1", "approve@1#0", "alice", timedelta(hours=1))
    run, request, now = "run-1", "approve@1#0", None
    if reason == "altered":
        token = token[:-3] + ("AAA" if not token.endswith("AAA") else "BBB")
    elif reason == "expired":
        now = time.time() + 3601
    elif reason == "foreign":
        request = "approve@2#0"
    else:
        token = LinkSigner("another").token(run, request, "alice", timedelta(hours=1))
    with pytest.raises(InvalidLinkError) as caught:
        signer.check(token, run, request, now=now)
    assert caught.value.reason == ("altered" if reason == "other-secret" else reason)


def test_a_secret_is_required(monkeypatch):
    monkeypatch.delenv("DURABLE_FLOW_SECRET", raising=False)
    with pytest.raises(InvalidInputError, match="DURABLE_FLOW_SECRET"):
        LinkSigner.from_env()
    monkeypatch.setenv("DURABLE_FLOW_SECRET", "x")
    assert LinkSigner.from_env().check(LinkSigner("x").token("r", "q", "p", timedelta(1)), "r", "q")


def test_durations():
    assert parse_duration("2d") == timedelta(days=2)
    assert parse_duration("90s") == timedelta(seconds=90)
    assert parse_duration("15m") == timedelta(minutes=15)
    assert parse_duration("30") == timedelta(seconds=30)
    for bad in ("soon", "-1h", "0d"):
        with pytest.raises(InvalidInputError):
            parse_duration(bad)
