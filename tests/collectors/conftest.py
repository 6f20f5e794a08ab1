"""pytest fixtures for the collector tests; the helpers themselves live in collect_helpers.py."""
import pytest

from collect_helpers import unprivileged_python


@pytest.fixture
def nobody_python():
    argv, why = unprivileged_python()
    if argv is None:
        pytest.skip(why)
    return argv
