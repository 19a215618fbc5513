"""Fixtures every test directory may use. Shared helpers are plain modules that pytest's
``pythonpath`` (pyproject.toml) puts on the path; test modules import them by name."""

import pytest
from kokoro_server_fixture import kokoro_server, stopping_server  # noqa: F401 (pytest fixtures, registered here)
from sagemaker_local_fixture import sagemaker_local  # noqa: F401 (a pytest fixture, registered here)
from tiers import mark_tiers


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test gets its tier (tests/tiers.py): ``make test-fast`` runs ``-m unit``."""
    mark_tiers(items)
