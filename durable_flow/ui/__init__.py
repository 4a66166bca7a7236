"""The web inbox and run inspector: ``durable-flow ui``.

A FastAPI app over any store: the inbox of open requests with forms
generated from their JSON Schema, runs and a run inspector, and a JSON API
under ``/api/``. Needs the ``ui`` extra (FastAPI, Jinja2, uvicorn,
python-multipart), so ``import durable_flow`` never loads it.
"""

from __future__ import annotations

from ._app import create_app

__all__ = ["create_app"]
