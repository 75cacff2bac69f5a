"""The whole persistence contract as one class to subclass."""

from __future__ import annotations

from agent_session.testing.contract_live import LiveContract
from agent_session.testing.contract_stored import StoredContract

__all__ = ["PersistenceContract"]


class PersistenceContract(StoredContract, LiveContract):
    """Every case a backend passes. In a test module of your own::

        class TestMyBackend(PersistenceContract):
            @pytest.fixture
            def kit(self) -> Kit:
                return MyKit()

    Run it with pytest and pytest-asyncio in auto mode (``asyncio_mode = "auto"``)."""
