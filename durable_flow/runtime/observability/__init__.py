"""Seeing what runs do: structured logs, OpenTelemetry spans, the observer every execution reports to."""
