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
