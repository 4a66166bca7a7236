from __future__ import annotations

import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from durable_flow import NotAuthorizedError, Principal
from durable_flow.runtime.people._passwords import hash_password, verify_password
from durable_flow.ui._bearer import JwtVerifier


def test_passwords_are_argon2id_hashes_that_verify():
    stored = hash_password("correct horse")
    assert stored.startswith("$argon2id$")
    assert "correct horse" not in stored
    assert verify_password(stored, "correct horse")
    assert not verify_password(stored, "wrong")
    assert not verify_password("not a hash", "correct horse")
    assert hash_password("correct horse") != stored  # salted


@pytest.mark.process
def test_the_product_hashes_at_rfc_9106s_cost_in_its_own_processes():
    import subprocess
    import sys

    code = ("from durable_flow.runtime.people._passwords import hash_password;"
            "print(hash_password('x'))")
    stored = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.strip()
    # argon2id, 64 MiB, three passes, four lanes (the tests' own processes use less)
    assert stored.startswith("$argon2id$v=19$m=65536,t=3,p=4$"), stored


def later() -> int:
    return int(time.time()) + 600


def test_a_shared_key_jwt_names_the_principal_and_roles():
    verifier = JwtVerifier("k" * 32, public=False)
    token = jwt.encode({"sub": "alice", "roles": ["finance"], "exp": later()}, "k" * 32,
                       algorithm="HS256")
    assert verifier.principal(token) == Principal("alice", ("finance",))
    assert verifier.principal(jwt.encode({"sub": "bob", "exp": later()}, "k" * 32)) == Principal("bob")


@pytest.mark.parametrize("claims", [
    {"roles": ["finance"], "exp": later()},
    {"sub": "alice", "roles": "finance", "exp": later()},
    {"sub": "alice", "exp": int(time.time()) - 60},
    {"sub": "alice", "roles": ["finance"]},  # no exp: it would never expire
    {"sub": "", "exp": later()},  # validly signed, names nobody
    {"sub": "  ", "exp": later()},
    {"sub": "alice", "roles": [" "], "exp": later()},
])
def test_bad_tokens_are_refused(claims):
    with pytest.raises(NotAuthorizedError):
        JwtVerifier("k" * 32, public=False).principal(jwt.encode(claims, "k" * 32))


def test_a_token_signed_with_another_key_or_none_is_refused():
    verifier = JwtVerifier("k" * 32, public=False)
    with pytest.raises(NotAuthorizedError):
        verifier.principal(jwt.encode({"sub": "a", "exp": later()}, "x" * 32))
    with pytest.raises(NotAuthorizedError):
        verifier.principal(jwt.encode({"sub": "a", "exp": later()}, None, algorithm="none"))


def test_a_public_key_verifies_asymmetric_tokens():
    private = ec.generate_private_key(ec.SECP256R1())
    public_pem = private.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo)
    token = jwt.encode({"sub": "sso-user", "roles": ["manager"], "exp": later()}, private,
                       algorithm="ES256")
    assert JwtVerifier(public_pem, public=True).principal(token) == Principal("sso-user", ("manager",))
    with pytest.raises(NotAuthorizedError):  # HS256 "signed" with the public key: the classic confusion
        JwtVerifier(public_pem, public=True).principal(
            jwt.encode({"sub": "forged", "exp": later()}, b"x" * 32, algorithm="HS256"))
