from __future__ import annotations

import dataclasses
import hashlib
from datetime import UTC, datetime, timedelta

from durable_flow.model._decisions import canonical_json, payload_digest, seal, verify_chain

T0 = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def _chain(n: int):
    chain, previous = [], ""
    for seq in range(1, n + 1):
        d = seal(previous, "run-1", seq, f"approve@{seq}#0", "approve", "answer", answer={"ok": seq},
                 by="alice", via="ui", at=T0 + timedelta(seconds=seq), comment=None,
                 payload={"amount": seq})
        chain.append(d)
        previous = d.digest
    return chain


def test_payload_digest_is_sha256_of_canonical_json():
    assert canonical_json({"b": 1, "a": [1, "é"]}) == '{"a":[1,"é"],"b":1}'.encode()
    assert payload_digest({"b": 1, "a": 2}) == hashlib.sha256(b'{"a":2,"b":1}').hexdigest()
    assert payload_digest({"a": 2, "b": 1}) == payload_digest({"b": 1, "a": 2})


def test_each_digest_covers_the_previous_one_and_the_record():
    chain = _chain(3)
    assert verify_chain(chain) is None
    first = chain[0]
    body = canonical_json(first.body())
    assert first.digest == hashlib.sha256(b"" + body).hexdigest()
    second = canonical_json(chain[1].body())
    assert chain[1].digest == hashlib.sha256(first.digest.encode() + second).hexdigest()


def test_an_edited_record_is_named():
    chain = _chain(4)
    chain[2] = dataclasses.replace(chain[2], by="mallory")
    assert verify_chain(chain) == (3, "decision 3 was changed (its digest does not match)")


def test_a_deleted_record_is_named_even_the_first():
    chain = _chain(4)
    assert verify_chain(chain[:1] + chain[2:])[0] == 2
    assert verify_chain(chain[1:])[0] == 1


def test_times_hash_the_same_in_any_zone():
    d = _chain(1)[0]
    local = dataclasses.replace(d, at=d.at.astimezone(datetime.now().astimezone().tzinfo))
    assert verify_chain([local]) is None
