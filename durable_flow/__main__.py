"""``python -m durable_flow``: the ``durable-flow`` command."""

from .cli import main

main()
