# The example's tests run as async functions (pytest-asyncio, as a project would set it).
import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.asyncio)
