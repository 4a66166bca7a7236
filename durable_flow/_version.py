"""The package version, kept in one place below every layer."""

__version__ = "0.1.0"
