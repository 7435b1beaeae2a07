"""The environment of a process that is a Spark Connect client and also starts classic Spark children."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from ..launch.submit_args import LOOPBACK, spark_child_env

# Set by pyspark in a process once it built a Connect client session; inherited by a child they would
# make that child's own SparkSession a Connect client too.
CONNECT_CLIENT_VARIABLES = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")


@contextlib.contextmanager
def no_client_marks() -> Iterator[None]:
    """Leave no Connect-client marks (`CONNECT_CLIENT_VARIABLES`) in this process's environment after
    the block: a classic Spark program started from here later (spark-submit inherits the environment)
    would otherwise become a Connect client."""
    before = {name: os.environ.get(name) for name in CONNECT_CLIENT_VARIABLES}
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def classic_spark_env(local_ip: str | None = LOOPBACK) -> dict[str, str]:
    """This process's environment for a Spark child (JVM, classic driver), without the variables a
    Connect client session left in it; `local_ip` as in `spark_child_env` (None: no ``SPARK_LOCAL_IP``)."""
    env = {key: value for key, value in os.environ.items()
           if key not in CONNECT_CLIENT_VARIABLES and key != "SPARK_LOCAL_IP"}
    env.update(spark_child_env(local_ip=local_ip))
    return env


__all__ = ["CONNECT_CLIENT_VARIABLES", "classic_spark_env", "no_client_marks"]
