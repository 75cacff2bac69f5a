"""The persistence contract (``agent_session.testing``) run against every backend of this
repository, from the installed package: a new backend joins by adding one kit to ``KITS``."""

from __future__ import annotations

import pytest

from agent_session.testing import Kit, PersistenceContract
from tests.backends import KITS


class TestEveryBackend(PersistenceContract):
    @pytest.fixture(params=sorted(KITS))
    def kit(self, request: pytest.FixtureRequest) -> Kit:
        return KITS[request.param]()

    # (42,000 events per store: a very large input, so make test runs it, test-fast does not)
    test_a_checkpoint_of_tens_of_thousands_of_lines_is_stored_whole = pytest.mark.slow(
        PersistenceContract.test_a_checkpoint_of_tens_of_thousands_of_lines_is_stored_whole
    )
