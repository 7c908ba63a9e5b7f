"""Fixtures the unit tests share (their code: tests/lib/)."""
import pytest

from tests.lib.shell import make_app


@pytest.fixture
def app(monkeypatch):
    """The Ryu shell built as ryu-manager would, its sockets and threads stubbed."""
    yield from make_app(monkeypatch)
