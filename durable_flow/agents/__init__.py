"""Agent nodes and chat models."""
