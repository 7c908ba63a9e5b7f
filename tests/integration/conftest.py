"""Fixtures of the integration tests."""
import pytest

from topologies.clean import clean_testbed


@pytest.fixture
def clean_machine():
    """No testbed leftovers before the test, and none after it (whatever it left)."""
    clean_testbed(quiet=True)
    yield
    clean_testbed(quiet=True)
