"""``durable-flow ui``: the web inbox and run inspector over the ``--db`` store."""

from __future__ import annotations

import errno
import socket
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from ._db import display_db, open_store
from ._options import RegistryOpt
from ._output import make_console
from ._support import CliError, UsageError, options
from ._targets import load_targets

__all__ = ["OPEN_WARNING", "own_url", "ui"]

OPEN_WARNING = ("warning: started without --token, so nobody can log in: everyone who opens "
                "this address is the admin, and people (durable-flow users) cannot answer as "
                "themselves; pass --token (or --jwt-key) for logins")

TargetsArg = Annotated[list[str] | None, typer.Argument(
    metavar="WORKFLOW...", show_default=False,
    help="Workflows this server runs itself (MODULE:NAME, path/to/file.py:NAME, or a "
         ".json/.yaml file with --registry): answered runs of them continue here, and their "
         "runs can be forked. Without them a separate `durable-flow worker` continues runs.")]


def ui(
    ctx: typer.Context,
    targets: TargetsArg = None,
    host: Annotated[str, typer.Option(
        help="Address to listen on; anything but loopback needs --token.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8765,
    registry: RegistryOpt = None,
    token: Annotated[str | None, typer.Option(
        envvar="DURABLE_FLOW_UI_TOKEN", show_default=False,
        help="Require this token on every request (Authorization: Bearer, or the login form). "
             "Also read from DURABLE_FLOW_UI_TOKEN.")] = None,
    notify_webhook: Annotated[str | None, typer.Option(
        "--notify-webhook", metavar="URL", show_default=False,
        help="POST each notification (a request opened, escalated, reassigned) here as JSON "
             "(Slack-compatible).")] = None,
    smtp: Annotated[str | None, typer.Option(
        "--smtp", metavar="HOST:PORT", show_default=False,
        help="Email each notification to its people through this SMTP server.")] = None,
    smtp_from: Annotated[str, typer.Option(
        "--smtp-from", metavar="ADDR", help="The sender of those emails.")
    ] = "durable-flow@localhost",
    jwt_key: Annotated[str | None, typer.Option(
        "--jwt-key", envvar="DURABLE_FLOW_JWT_KEY", show_default=False,
        help="Accept bearer JWTs signed with this shared secret (HS256); their sub and roles "
             "claims name the person.")] = None,
    jwt_public_key: Annotated[Path | None, typer.Option(
        "--jwt-public-key", metavar="PEM_FILE", show_default=False,
        help="Accept bearer JWTs signed with the key of this PEM public key file.")] = None,
    base_url: Annotated[str | None, typer.Option(
        "--base-url", metavar="URL", show_default=False,
        help="Where this server is reached, for the links in notifications (default: the "
             "address it listens on).")] = None,
) -> None:
    """Serve the web inbox (answer requests in a browser) and the run inspector.

    Pages: / (the inbox), /runs, /runs/RUN; the JSON API is described at
    /api/openapi.json. Stop with Ctrl-C.
    """
    try:
        from ..ui._security import check_bind
        from ..ui._serve import serve
    except ImportError as exc:  # the optional dependencies are missing
        raise CliError(f"the web UI needs the 'ui' extra: pip install 'durable-flow[ui]' "
                       f"({exc.name} is missing)") from None
    try:
        check_bind(host, token)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    _check_free(host, port)
    opts = options(ctx)
    workflows = [t.workflow for t in load_targets(targets or [], registry)]
    console = make_console()

    verifier = jwt_verifier(jwt_key, jwt_public_key)

    def ready(url: str) -> None:
        names = ", ".join(f"{wf.name}@{wf.version}" for wf in workflows) or "none (use a worker)"
        console.print(Text(f"durable-flow ui on {url} over {display_db(opts.db)}; runs here: "
                           f"{names}{'; token required' if token else ''}"), soft_wrap=True)
        if token is None and verifier is None:
            console.print(Text(OPEN_WARNING), soft_wrap=True)

    serve(open_store(opts.db, create=True, serving=True), workflows=workflows, host=host, port=port,
          token=token, on_ready=ready, notifiers=notifiers_from(notify_webhook, smtp, smtp_from),
          base_url=base_url or own_url(host, port), jwt=verifier)


def own_url(host: str, port: int) -> str:
    """The URL this server is reached at when no ``--base-url`` says otherwise.

    A wildcard address (``0.0.0.0``, ``::``) is reached by the machine's name.
    """
    if host in ("0.0.0.0", "::", ""):  # noqa: S104 (naming the wildcard, not binding it)
        host = socket.gethostname()
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def jwt_verifier(key: str | None, public_key: Path | None) -> Any:
    """The ``JwtVerifier`` of ``--jwt-key`` or ``--jwt-public-key`` (None without either)."""
    from ..ui._bearer import JwtVerifier

    if public_key is not None:
        return JwtVerifier(public_key.read_text(), public=True)
    return JwtVerifier(key, public=False) if key else None


def notifiers_from(webhook: str | None, smtp: str | None, sender: str) -> list[Any]:
    """The notifiers ``--notify-webhook`` and ``--smtp HOST:PORT`` ask for."""
    from ..runtime.notifications._notifiers import SmtpNotifier, WebhookNotifier

    found: list[Any] = [WebhookNotifier(webhook)] if webhook else []
    if smtp:
        host, _, port = smtp.rpartition(":")
        if not host or not port.isdigit():
            raise UsageError(f"--smtp takes HOST:PORT, not {smtp!r}")
        found.append(SmtpNotifier(host, int(port), sender))
    return found


def _check_free(host: str, port: int) -> None:
    """One line, before anything starts, when the address cannot be listened on."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            probe.bind((host, port))
    except OSError as exc:
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}"
                       f"{' (is another server on it? pass --port)' if exc.errno == errno.EADDRINUSE else ''}"
                       ) from None
