"""Traces and metrics: off by default, on by settings (docs/ARCHITECTURE.md)."""
