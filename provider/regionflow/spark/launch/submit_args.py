"""The arguments of one spark-submit: Airflow's `SparkSubmitHook` keyword arguments for a grant, and
the Spark installation and environment every Spark child process gets (`spark_home`,
`spark_child_env`, shared with the standalone cluster and the Spark Connect servers). Pure: no I/O
beyond finding pyspark, no Airflow, no PySpark import.

How the master reaches the hook. `SparkSubmitHook` reads its master from an Airflow connection. With
``conn_id=None`` (the default) regionflow uses its own connection id per effective master,
``regionflow_<master slug>`` (e.g. ``regionflow_local_2``, ``regionflow_spark_127_0_0_1_7077``), and
defines it as the environment variable ``AIRFLOW_CONN_<ID>`` = ``{"conn_type": "spark", "host":
"<master>"}`` in this process right before the hook is built. Airflow 3.3 looks environment
variables up first in every context (the `regionflow run` CLI without a metadata database, the
dag processor, and task processes whose later backend is the execution API), so no database row and
no per-submission state are needed; the id is a pure function of the master, hence safe to share
between threads. A caller who needs connection extras (kerberos, a spark-binary, ...) passes
``conn_id`` (the hook's own default is ``spark_default``); that connection is used as is, and its
master must equal the host's sized master (checked before submitting).

Sizing: `slot_profile` is the profile each granted slot is sized to (`sizing.slot_size` of the unit's
requests); `regionflow.spark.launch.sizing` is the one mapping from it to Spark conf (one executor per slot on
``spark://`` masters, one JVM of ``local[<slots>]`` on ``local`` masters). Besides,
``spark.ui.enabled=false`` always; for loopback masters ``spark.driver.bindAddress`` and
``spark.driver.host`` are 127.0.0.1 and ``SPARK_LOCAL_IP=127.0.0.1`` is set for the child.

The job's own Spark conf is passed through; a key regionflow sets (listed in the error) may only be
repeated with the same value, anything else is a `SubmitConfigError` naming the key.

A host's ``properties_file`` (an authenticated standalone master's secret, `auth`) reaches spark-submit
as ``--properties-file`` once it is found private to this user; its secret is never on the command
line. Spark then skips ``spark-defaults.conf`` (the hook cannot add ``--load-spark-defaults``); regionflow
sets nothing there, and host-wide settings of such a host belong in its properties file.
"""
from __future__ import annotations

import importlib.util
import ipaddress
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from ...core.errors import RegionflowError, SpecError
from ...core.resources import ResourceProfile
from ..servers.auth import checked_properties_file
from .cluster_managers import exclusion_conf
from .masters import Master, MasterKind
from .sizing import SizedConf, sized_conf

LOOPBACK = "127.0.0.1"
MANAGED_CONN_PREFIX = "regionflow_"

# Hook keyword arguments that stand for a Spark conf key; the key is checked for conflicts, the
# keyword is what reaches spark-submit.
_HOOK_ARG_OF_CONF_KEY = {
    "spark.cores.max": "total_executor_cores",
    "spark.executor.cores": "executor_cores",
    "spark.executor.memory": "executor_memory",
    "spark.driver.memory": "driver_memory",
    "spark.app.name": "name",
}
_INT_HOOK_ARGS = ("total_executor_cores", "executor_cores")

# Environment variables the child needs and the user may not redefine differently.
_OWNED_ENV = ("SPARK_HOME", "SPARK_LOCAL_IP")


class SubmitConfigError(RegionflowError, ValueError):
    """Submission arguments are invalid: bad slots, master, conf conflict, missing module."""


class SparkNotInstalled(RegionflowError):
    """PySpark (which ships spark-submit) cannot be found in this Python environment."""


# ---- Spark installation and child environment ---------------------------------------------------


@lru_cache(maxsize=1)
def spark_home() -> str:
    """The directory of the installed pyspark package, which is a complete SPARK_HOME."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        raise SparkNotInstalled(
            f"pyspark is not installed in {sys.executable}'s environment; install "
            "airflow-provider-regionflow (it pins pyspark) or pip install pyspark"
        )
    return os.path.dirname(os.path.abspath(spec.origin))


def spark_submit_binary() -> str:
    """Absolute path of the spark-submit script bundled with pyspark."""
    return os.path.join(spark_home(), "bin", "spark-submit")


def spark_child_env(*, local_ip: str | None = LOOPBACK) -> dict[str, str]:
    """Environment a Spark child process needs, independent of PATH and of the `python3` on it; with
    `local_ip`, the address its JVM binds and advertises (``SPARK_LOCAL_IP``)."""
    env = {
        "SPARK_HOME": spark_home(),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    if local_ip is not None:
        env["SPARK_LOCAL_IP"] = local_ip
    return env


def driver_address(target: Master, bind_address: str = LOOPBACK) -> str | None:
    """The address a driver of `target` binds and advertises: 127.0.0.1 when everything of the master runs
    on this machine; else `bind_address` (``[regionflow] bind_address``, this machine's address that the
    master's executors connect back to) when it is not a loopback address; None (Spark's own choice, for a
    cluster manager that places the driver itself) otherwise."""
    if target.loopback:
        return LOOPBACK
    try:
        loopback = ipaddress.ip_address(bind_address).is_loopback
    except ValueError:  # a name: config loading refuses it; take it for loopback, so Spark chooses
        loopback = True
    return None if loopback else bind_address


def driver_conf(address: str | None) -> dict[str, str]:
    """The Spark conf that binds a driver to `address` and advertises it (nothing for None)."""
    return {} if address is None else {"spark.driver.bindAddress": address, "spark.driver.host": address}


# ---- submit arguments --------------------------------------------------------------------------


def build_submit_kwargs(
    *,
    application: str,
    application_args: list[str],
    master: str,
    slots: int,
    slot_profile: ResourceProfile,
    job_conf: Mapping[str, str] | None,
    py_files: Sequence[str],
    name: str,
    conn_id: str | None = None,
    env_vars: Mapping[str, str] | None = None,
    excluded_nodes: Sequence[str] = (),
    pod_template_file: str | None = None,
    properties_file: str | None = None,
) -> dict[str, Any]:
    """Keyword arguments of `SparkSubmitHook` running `application` on `slots` slots of `master`.

    See the module docstring for the sizing rules and for how the master reaches the hook.
    `excluded_nodes` are nodes of a YARN or Kubernetes master the executors must avoid (the job's
    blocklist, `cluster_managers`); Kubernetes takes them through `pod_template_file`. `properties_file`
    is the host's (see the module docstring).
    """
    _check_application(application)
    _check_slots(slots)
    target = sized_master(master, slots)
    sized = _owned_conf(target, slots, slot_profile, _app_name(name))
    try:
        sized.owned.update(exclusion_conf(target, excluded_nodes, pod_template_file))
    except ValueError as error:
        raise SubmitConfigError(f"master {master!r}: {error}; write it with cluster_managers.write_pod_template") \
            from None
    conf = _merged_conf(sized, job_conf)
    kwargs: dict[str, Any] = {
        "conn_id": conn_id or managed_conn_id(target.url),
        "conf": {key: value for key, value in conf.items() if key not in _HOOK_ARG_OF_CONF_KEY},
        "application_args": [str(arg) for arg in application_args],
        "py_files": _joined_py_files(py_files),
        "env_vars": _merged_env(target, env_vars),
        "spark_binary": spark_submit_binary(),
    }
    if properties_file is not None:
        kwargs["properties_file"] = checked_properties_file(properties_file, master)
    kwargs.update(_hook_args(conf))
    return kwargs



def managed_conn_id(master: str) -> str:
    """regionflow's Airflow connection id for `master`: ``regionflow_`` + a slug of the master."""
    return MANAGED_CONN_PREFIX + re.sub(r"[^a-z0-9]+", "_", master.lower()).strip("_")


def connection_env(master: str) -> tuple[str, str]:
    """Name and value of the ``AIRFLOW_CONN_*`` variable that defines `managed_conn_id(master)`."""
    return (f"AIRFLOW_CONN_{managed_conn_id(master).upper()}",
            json.dumps({"conn_type": "spark", "host": master}))


def _check_application(application: str) -> None:
    if not isinstance(application, str) or not application.endswith(".py"):
        raise SubmitConfigError(
            f"application {application!r} is not a Python file; regionflow submits PySpark programs "
            "(a path ending in .py)"
        )


def _check_slots(slots: int) -> None:
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
        raise SubmitConfigError(f"slots={slots!r} is not valid; a submission needs a whole number of slots >= 1")


def sized_master(master: str, slots: int) -> Master:
    """`master` parsed (`regionflow.spark.launch.masters`) for a submission of `slots` slots (``local[slots]`` for a
    local master); a `SubmitConfigError` names an unsupported one, or a missing provider it needs."""
    try:
        parsed = Master.parse(master).sized(slots)
    except SpecError as error:
        raise SubmitConfigError(str(error)) from None
    if parsed.kind is MasterKind.KUBERNETES and not kubernetes_provider_installed():
        raise SubmitConfigError(
            f"master {master!r}: Airflow's Spark provider submits to Kubernetes only with "
            "apache-airflow-providers-cncf-kubernetes installed; pip install 'airflow-provider-regionflow[kubernetes]'")
    return parsed


def kubernetes_provider_installed() -> bool:
    """Whether Airflow's cncf-kubernetes provider (which the Spark hook needs for k8s:// masters) is installed."""
    try:
        return importlib.util.find_spec("airflow.providers.cncf.kubernetes") is not None
    except ImportError:
        return False


def _app_name(name: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise SubmitConfigError(f"name={name!r} is empty; give the submission the region's name")
    name = name.strip()
    return name if name.startswith("regionflow") else f"regionflow {name}"


def _owned_conf(target: Master, slots: int, profile: ResourceProfile, app_name: str) -> SizedConf:
    conf = {"spark.master": target.url, "spark.app.name": app_name, "spark.ui.enabled": "false"}
    conf.update(driver_conf(driver_address(target)))
    sized = sized_conf(target, slots, profile)
    return SizedConf({**conf, **sized.owned}, sized.proposed)


def _merged_conf(sized: SizedConf, job_conf: Mapping[str, Any] | None) -> dict[str, str]:
    """The grant's conf with the job's: the job may override proposed keys, not owned ones."""
    owned = sized.owned
    merged = {**sized.proposed, **owned}
    for key, value in (job_conf or {}).items():
        text = _conf_text(key, value)
        if key in owned and not _same_conf_value(owned[key], text):
            raise SubmitConfigError(
                f"job conf sets {key}={text} but regionflow sets {key}={owned[key]} from the slot grant; "
                f"drop {key} from the job conf (regionflow owns: {', '.join(sorted(owned))})"
            )
        merged[key] = text
    return merged


def _conf_text(key: Any, value: Any) -> str:
    if not isinstance(key, str) or not key.strip():
        raise SubmitConfigError(f"job conf key {key!r} is not a Spark conf name such as 'spark.sql.shuffle.partitions'")
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        raise SubmitConfigError(f"job conf {key} has no value; give it one or drop it")
    return str(value)


def _same_conf_value(owned: str, given: str) -> bool:
    return owned.strip().lower() == given.strip().lower()


def _hook_args(conf: Mapping[str, str]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for key, arg in _HOOK_ARG_OF_CONF_KEY.items():
        if key not in conf:
            continue
        if arg in _INT_HOOK_ARGS and not conf[key].isdigit():
            raise SubmitConfigError(f"job conf {key}={conf[key]} is not a whole number of cores; fix or drop it")
        args[arg] = int(conf[key]) if arg in _INT_HOOK_ARGS else conf[key]
    return args


def _joined_py_files(py_files: Sequence[str]) -> str | None:
    if isinstance(py_files, str):
        raise SubmitConfigError(f"py_files={py_files!r} must be a list of paths, not one string")
    for path in py_files:
        if "," in path:
            raise SubmitConfigError(f"py file {path!r} contains a comma, which spark-submit's --py-files cannot carry; "
                                    "move it to a directory without commas")
    return ",".join(py_files) or None


def _merged_env(target: Master, env_vars: Mapping[str, str] | None) -> dict[str, str]:
    env = spark_child_env(local_ip=LOOPBACK if target.loopback else None)
    for key, value in (env_vars or {}).items():
        if key in _OWNED_ENV and key in env and env[key] != str(value):
            raise SubmitConfigError(
                f"env var {key}={value} conflicts with regionflow's {key}={env[key]}; drop {key} from env_vars"
            )
        env[key] = str(value)
    return env


__all__ = ["LOOPBACK", "MANAGED_CONN_PREFIX", "SparkNotInstalled", "SubmitConfigError", "build_submit_kwargs",
           "connection_env", "driver_address", "driver_conf", "kubernetes_provider_installed", "managed_conn_id",
           "sized_master", "spark_child_env", "spark_home", "spark_submit_binary"]
