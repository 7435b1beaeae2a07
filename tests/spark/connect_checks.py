"""Checks of a Spark Connect server shared by the tests that start one (test_connect.py,
test_server_oom.py)."""
from __future__ import annotations

from regionflow.spark.servers.auth import remote_session


def serves(server, rows: int = 3) -> bool:
    """A new client session of `server` (with its token) counts `rows` rows."""
    spark = remote_session(server.url, server.token)
    try:
        return spark.range(rows).count() == rows
    finally:
        spark.stop()
