"""Browser tests of the web page (see conftest.py)."""
