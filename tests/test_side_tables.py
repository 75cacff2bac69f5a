"""The tables this build keeps beside a store's logs (receipts, branch pointers, export
cursors, the ADK catalog) are created safely by processes that start at the same moment."""

from __future__ import annotations

import threading

import pytest

from agent_session.beside_logs.side_tables import SideDatabase
from tests.backends import fresh_database


@pytest.mark.slow  # (20 fresh databases; make test runs it)
def test_connections_that_create_one_side_table_together_all_have_it() -> None:
    failed: list[BaseException] = []
    for _ in range(20):
        dsn = fresh_database()
        together = threading.Barrier(4)

        def create(dsn: str = dsn, together: threading.Barrier = together) -> None:
            db = SideDatabase.postgres(dsn)
            try:
                together.wait()
                db.create_table("t", "CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY)")
                db.execute("INSERT INTO t (k) VALUES (?)", (threading.current_thread().name,))
            except BaseException as e:  # (collected: a thread's raise would be lost)
                failed.append(e)
            finally:
                db.close()

        threads = [threading.Thread(target=create) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failed == []
