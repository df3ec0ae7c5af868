"""Deterministic orchestration only: every piece of I/O is an activity."""
