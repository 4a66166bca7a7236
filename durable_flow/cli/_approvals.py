"""Commands of approvals: ``users add|list|remove|set-roles|set-password``, ``audit``, ``link``."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Annotated, Any

import typer
from rich.table import Table

from ..model._audit import SECRET_ENV, AuditReport
from ..model._decisions import Decision
from ..runtime.people._links import parse_duration
from ..runtime.people._users import Users
from ._db import opened
from ._options import JsonOpt, RunArg
from ._output import emit_json, make_console, preview, when
from ._support import fail, options

__all__ = ["audit", "link", "users_add", "users_list", "users_remove", "users_set_password",
           "users_set_roles"]

NameArg = Annotated[str, typer.Argument(metavar="NAME", help="The person's name (their login).")]
RolesOpt = Annotated[list[str] | None, typer.Option(
    "--role", metavar="ROLE", help="A role the person holds (repeat for more).")]
PasswordStdinOpt = Annotated[bool, typer.Option(
    "--password-stdin", help="Read the password from the first line of standard input (for "
                             "scripts: `echo \"$PW\" | durable-flow users add ...`).")]


def read_password(from_stdin: bool) -> str:
    """The password: the first line of stdin with ``--password-stdin``, else asked twice.

    Asked on a pipe, the two lines are read as they come (nothing to hide,
    and no warning that echo cannot be turned off).
    """
    if not from_stdin:
        return str(typer.prompt("Password", hide_input=sys.stdin.isatty(),
                                confirmation_prompt=True))
    line = sys.stdin.readline()
    password = line[:-1] if line.endswith("\n") else line
    password = password[:-1] if password.endswith("\r") else password
    if not password:
        fail("--password-stdin read no password (an empty first line)")
    return password


def users_add(ctx: typer.Context, name: NameArg, role: RolesOpt = None,
              email: Annotated[str | None, typer.Option(
                  "--email", metavar="ADDR", help="Where their notifications go.")] = None,
              password_stdin: PasswordStdinOpt = False) -> None:
    """Add a person of the web app; the password is asked twice and kept as an argon2 hash."""
    password = read_password(password_stdin)
    opts = options(ctx)

    async def go() -> Any:
        async with opened(opts, create=True) as rt:
            return await Users(rt.store).add(name, password, roles=role or (), email=email)

    user = asyncio.run(go())
    make_console().print(f"user {user.name} added" + _roles(user.roles))


def users_list(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List the people of the web app (names, roles, email addresses)."""
    opts = options(ctx)

    async def go() -> Any:
        async with opened(opts, logs=False) as rt:
            return await Users(rt.store).list()

    people = asyncio.run(go())
    if as_json:
        emit_json([{"name": u.name, "roles": list(u.roles), "email": u.email,
                    "created_at": u.created_at} for u in people])
        return
    table = Table("name", "roles", "email", "added")
    for u in people:
        table.add_row(u.name, ", ".join(u.roles), u.email or "", when(u.created_at))
    make_console().print(table)


def users_remove(ctx: typer.Context, name: NameArg) -> None:
    """Remove a person of the web app."""
    opts = options(ctx)

    async def go() -> None:
        async with opened(opts) as rt:
            await Users(rt.store).remove(name)

    asyncio.run(go())
    make_console().print(f"user {name} removed")


def users_set_roles(ctx: typer.Context, name: NameArg, role: RolesOpt = None) -> None:
    """Replace a person's roles (no --role: none)."""
    opts = options(ctx)

    async def go() -> Any:
        async with opened(opts) as rt:
            return await Users(rt.store).set_roles(name, role or ())

    user = asyncio.run(go())
    make_console().print(f"user {user.name}" + (_roles(user.roles) or " holds no role"))


def users_set_password(ctx: typer.Context, name: NameArg,
                       password_stdin: PasswordStdinOpt = False) -> None:
    """Give a person a new password (asked twice); their sessions in the web app end."""
    password = read_password(password_stdin)
    opts = options(ctx)

    async def go() -> None:
        async with opened(opts) as rt:
            await Users(rt.store).set_password(name, password)

    asyncio.run(go())
    make_console().print(f"user {name}: password changed, logged out everywhere")


def audit(ctx: typer.Context, run_id: RunArg,
          verify: Annotated[bool, typer.Option(
              "--verify", help="Check the chain, its anchor and the answers (under "
              "DURABLE_FLOW_SECRET); exit 1 naming each problem.")] = False,
          require_keyed: Annotated[bool, typer.Option(
              "--require-keyed", help="With --verify: also exit 1 unless the chain is keyed "
              "(HMAC under DURABLE_FLOW_SECRET), not plain sha256.")] = False,
          as_json: JsonOpt = False) -> None:
    """Print a run's decisions (answers, policies, escalations, reassignments, timeouts)."""
    opts = options(ctx)

    async def go() -> tuple[list[Decision], AuditReport | None]:
        async with opened(opts, logs=False) as rt:
            chain = await rt.decisions(run_id)
            return chain, await rt.verify_audit(run_id) if verify or require_keyed else None

    chain, report = asyncio.run(go())
    if as_json:
        emit_json(chain)
    else:
        _print_chain(chain)
    if report is None:
        return
    unset = "" if os.environ.get(SECRET_ENV) else ": DURABLE_FLOW_SECRET unset"
    kind = "keyed (HMAC-SHA256)" if report.keyed else f"unkeyed (plain sha256{unset})"
    if not report.ok:
        fail(f"the audit trail of run {run_id} is broken ({kind}): " + "; ".join(report.problems))
    if require_keyed and not report.keyed:
        fail(f"the audit trail of run {run_id} is intact but unkeyed: anyone who can edit the "
             "database can rewrite it (set DURABLE_FLOW_SECRET)")
    if not as_json:
        make_console().print(f"chain intact: {report.decisions} decision(s), {kind}")


def link(ctx: typer.Context, run_id: RunArg,
         request_id: Annotated[str, typer.Argument(metavar="REQUEST_ID",
                                                   help="The request (see `inbox`).")],
         for_: Annotated[str, typer.Option("--for", metavar="PRINCIPAL",
                                           help="Who answers with the link.")],
         expires: Annotated[str, typer.Option(
             "--expires", help="How long it works: 90s, 15m, 12h, 2d, 1w.")] = "2d",
         base_url: Annotated[str, typer.Option(
             "--base-url", metavar="URL", help="Where `durable-flow ui` is reached.")
         ] = "http://127.0.0.1:8765") -> None:
    """Print a signed, expiring, single-use link to answer one request (DURABLE_FLOW_SECRET)."""
    opts = options(ctx)
    ttl = parse_duration(expires)

    async def go() -> str:
        async with opened(opts, logs=False) as rt:
            return await rt.approval_link(run_id, request_id, for_=for_, expires_in=ttl,
                                          base_url=base_url)

    print(asyncio.run(go()))


def _print_chain(chain: list[Decision]) -> None:
    table = Table("#", "when", "request", "kind", "by", "via", "answer", "comment")
    for d in chain:
        table.add_row(str(d.seq), when(d.at), d.request_id, d.kind, d.by or "", d.via,
                      preview(d.answer, 60), d.comment or "")
    make_console().print(table)


def _roles(roles: tuple[str, ...]) -> str:
    return f" with roles {', '.join(roles)}" if roles else ""
