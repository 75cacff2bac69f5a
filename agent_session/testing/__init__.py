"""The contract suite every persistence backend passes, shipped so that a backend outside this
repository runs it too (needs ``pytest`` and ``pytest-asyncio``): subclass
:class:`PersistenceContract` and give it a ``kit`` fixture returning your :class:`Kit`."""

from agent_session.testing.contract import PersistenceContract
from agent_session.testing.contract_live import LiveContract
from agent_session.testing.contract_stored import StoredContract
from agent_session.testing.kits import Kit, MemoryKit

__all__ = ["Kit", "LiveContract", "MemoryKit", "PersistenceContract", "StoredContract"]
