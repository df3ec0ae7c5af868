"""The next build of the worker, for the upgrade test (tests/integration/test_upgrade.py)."""
