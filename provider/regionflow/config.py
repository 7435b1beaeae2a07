"""The ``[regionflow]`` section of airflow.cfg: options, defaults, and their provider metadata.

Every option is documented once, in `OPTIONS`, which feeds both `RegionflowConfig.from_airflow`
and the provider's ``config`` metadata (so ``airflow config list`` shows the defaults). Values can
also come from ``AIRFLOW__REGIONFLOW__<OPTION>`` environment variables, as for any Airflow option.
"""
from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .core.errors import RegionflowError, SpecError
from .core.modes import ExchangeMode
from .core.schema import did_you_mean
from .scheduling.hosts import Cluster
from .scheduling.speculation_policy import SpeculationConfig, parse_switch
from .spark.launch.placement import (
    DATA_DIR_SHARED_CHOICES,
    bind_address_problems,
    data_dir_problem,
)
from .spark.launch.targets import backend_problem, parse_cluster

SECTION = "regionflow"


@dataclass(frozen=True)
class Option:
    """One ``[regionflow]`` option: its declaration is the model that loading, the provider's config
    listing and ``regionflow schema config`` read (type, default, range, choices)."""

    name: str
    description: str
    type: str
    example: str | None
    default: str | None
    minimum: float | None = None
    maximum: float | None = None
    above: bool = False  # the minimum itself is not allowed
    choices: tuple[str, ...] = ()
    sensitive: bool = False  # Airflow masks it and reads ``<name>_cmd`` / ``<name>_secret`` variants


OPTIONS: tuple[Option, ...] = (
    Option("hosts", "The cluster the slot pool manages: a host spec ('a:slots=2,affinity=0-1;b:slots=2,"
           "master=spark://127.0.0.1:7077') or JSON. Empty: one host 'localhost' with one slot per CPU core "
           "running Spark local[k].", "string", "localhost:slots=4", ""),
    Option("data_dir", "Where region outputs (blocking partitions) and relative sink paths live; any Spark URI. "
           "A relative path is relative to AIRFLOW_HOME (resolved once, when the options are read, so every "
           "process finds the same directory); a URI with a scheme (hdfs://, s3a://, file:/...) is used as "
           "given. Empty: AIRFLOW_HOME/regionflow-data.", "string", "/data/regionflow", ""),
    Option("data_dir_shared", "Whether data_dir is the same directory on every machine that runs a host's Spark: "
           "'auto' (a distributed file system URI such as hdfs:// or s3a://, or a path on a network file system such "
           "as NFS or CephFS) or 'true' (the operator says so, e.g. for a mount whose type does not tell). A cluster "
           "with a host on another machine and a data_dir not shared is refused when the options are read.",
           "string", "true", "auto", choices=DATA_DIR_SHARED_CHOICES),
    Option("bind_address", "This machine's address that the servers regionflow starts here bind: the Spark drivers "
           "of hosts whose master is on another machine, which that master's executors connect back to. The address "
           "of one interface; never 0.0.0.0. Loopback by default (the Spark Connect endpoints, the drivers of local "
           "and loopback hosts and the embedded Airflow stay on 127.0.0.1 whatever it is).", "string", "10.0.0.5",
           "127.0.0.1"),
    Option("store_url", "SQLAlchemy URL of regionflow's store (grants, attempts, commits, blocklist, metrics). "
           "Empty: sqlite:///AIRFLOW_HOME/regionflow.db. Sensitive, as Airflow's sql_alchemy_conn: masked in "
           "`airflow config list`, and may come from a command (store_url_cmd) or the configured secrets backend "
           "(store_url_secret) instead of the file.", "string", "postgresql://user:pass@db/regionflow", "",
           sensitive=True),
    Option("mode", "Default global exchange mode of regionflow.transform().", "string",
           "pointwise-pipelined-only", "forward-pipelined-only"),
    Option("max_shards", "At most this many Airflow task instances (Spark submissions) per logical region and "
           "DAG run; a logical region with more execution regions runs them in shards.", "integer", "16", "8",
           minimum=1),
    Option("blocklist_expiry", "Seconds a (job, host) blocklist entry lives.", "float", "60", "60",
           minimum=0, above=True),
    Option("lost_host_probe_interval", "Seconds between probes of a lost host (its Spark Connect server or "
           "standalone master silent), which is blocklisted for every DAG run: the entry is lifted as soon as the "
           "host answers and extended while it stays silent. 0: no probe, the entry expires after "
           "blocklist_expiry.", "float", "10", "10", minimum=0),
    Option("partition_retention", "Seconds to keep a run's blocking partitions. 0: each is deleted as soon as "
           "every consumer of it has committed (Flink's release rule); more: kept for debugging, and `regionflow "
           "gc` deletes them once their run has ended this long ago.", "float", "86400", "0", minimum=0),
    Option("elastic_wait", "Seconds a region task with adaptive vertices (parallelism=(min, max)) waits with its full "
           "slot request, alone in the queue, before it starts with the largest smaller request the free slots hold "
           "(its adaptive vertices then run at fewer subtasks, never below min).", "float", "10", "10", minimum=0),
    Option("resource_wait_timeout", "Seconds a DAG run's slot requests may wait for resources before the "
           "executor logs a not-enough-resources notice.", "float", "300", "300", minimum=0),
    Option("spark_conf", "JSON object of Spark conf passed to every region submission.", "string",
           '{"spark.sql.adaptive.enabled": "true"}', "{}"),
    Option("speculation", "Default of regionflow.transform(speculation=): True or False (on/off also read). A DAG's "
           "transform() argument and a vertex's SparkVertexOperator(speculation=) override it.", "boolean", "True",
           "False"),
    Option("speculation_quantile", "Fraction of a region task's shards that must have finished before any "
           "attempt is called slow; in (0, 1].", "float", "0.5", "0.75"),
    Option("speculation_multiplier", "An attempt is slow once it has run this many times the median running "
           "time of the finished shards; at least 1.", "float", "2", "1.5"),
    Option("speculation_min_runtime", "Seconds an attempt must have run before it can be called slow. Flink "
           "uses 60 s and Spark 0.1 s; 10 s is a few Spark submission start-ups, so a JVM that is merely "
           "starting is never copied.", "float", "30", "10"),
    Option("speculation_interval", "Seconds between two checks of a region's shards (a reschedule-mode "
           "sensor checks at most every 5 s).", "float", "5", "1"),
    Option("speculation_max_attempts", "At most this many concurrent attempts per shard (the original and "
           "its copies); at least 2.", "integer", "3", "2"),
    Option("speculation_weight_by_input", "Compare running times per input byte when the shards' inputs "
           "differ in size: True or False (on/off also read).", "boolean", "False", "True"),
    Option("spark_conn_id", "Airflow connection used by SparkSubmitHook; empty: one managed connection per host "
           "master.", "string", "spark_default", ""),
    Option("backend", "How region tasks and speculative copies run an attempt: 'session' (a client session on "
           "the host's long-lived Spark Connect server, which the first region granted the host starts, or a host's "
           "conn_id names; `regionflow session start` for servers run as services) or 'submit' (one "
           "spark-submit per attempt, e.g. for YARN or Kubernetes).", "string", "submit", "session",
           choices=("session", "submit")),
    Option("session_base_port", "Session backend: host i of the cluster serves Spark Connect on "
           "127.0.0.1:<this + i>.", "integer", "15002", "15002", minimum=1024, maximum=65535),
    Option("session_state_dir", "Session backend: pid/port files and logs of the Spark Connect servers. Empty: "
           "AIRFLOW_HOME/regionflow-sessions.", "string", "/srv/regionflow/sessions", ""),
    Option("slot_idle_timeout", "Seconds a host may hold no granted slot before its idle capacity is released "
           "(FLIP-138's idle slot timeout). Session backend: the RegionExecutor stops the host's Spark Connect "
           "server (the next region on the host starts it again, a cold start of a few seconds). Submit backend: "
           "nothing to release, an application lives as long as its attempt. 0 keeps servers up.", "float", "600",
           "600", minimum=0),
)
RENAMED = {"session_idle_timeout": "slot_idle_timeout"}  # old option name -> its name now
_BY_NAME = {option.name: option for option in OPTIONS}
BACKENDS = _BY_NAME["backend"].choices


def provider_config_metadata() -> dict[str, Any]:
    """The ``config`` entry of get_provider_info()."""
    return {
        SECTION: {
            "description": "regionflow: pipelined regions, FIFO bulk slot pool and Spark submissions.",
            "options": {
                option.name: {"description": option.description, "version_added": "0.1.0", "type": option.type,
                              "example": option.example, "default": _format_escaped(option.default),
                              **({"sensitive": True} if option.sensitive else {})}
                for option in OPTIONS
            },
        }
    }


_DEFAULTS = {option.name: option.default or "" for option in OPTIONS}


def _format_escaped(value: str | None) -> str | None:
    """Airflow runs str.format() over provider defaults (for {AIRFLOW_HOME}-style variables)."""
    return None if value is None else value.replace("{", "{{").replace("}", "}}")


@dataclass(frozen=True)
class RegionflowConfig:
    cluster: Cluster
    data_dir: str
    store_url: str
    mode: ExchangeMode
    max_shards: int
    blocklist_expiry: float
    resource_wait_timeout: float
    elastic_wait: float = 10.0
    spark_conf: dict[str, str] = field(default_factory=dict)
    spark_conn_id: str | None = None
    speculation: bool = False
    speculation_config: SpeculationConfig = field(default_factory=SpeculationConfig)
    backend: str = "session"
    session_base_port: int = 15002
    session_state_dir: str = ""
    slot_idle_timeout: float = 600.0
    lost_host_probe_interval: float = 10.0
    partition_retention: float = 0.0
    bind_address: str = "127.0.0.1"
    data_dir_shared: str = "auto"

    @classmethod
    def from_airflow(cls) -> RegionflowConfig:
        from airflow.configuration import conf

        def get(name: str) -> str:
            return conf.get(SECTION, name, fallback="")

        def origin(name: str) -> str:
            variable = f"AIRFLOW__{SECTION.upper()}__{name.upper()}"
            if variable in os.environ:
                return f"set by the environment variable {variable}"
            from airflow.configuration import AIRFLOW_CONFIG

            return f"set in {AIRFLOW_CONFIG}"

        check_option_names(conf.getsection(SECTION) or {}, origin)
        return cls.from_values(get, airflow_home=conf.get("core", "airflow_home", fallback=None)
                               or os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow"), origin=origin)

    @classmethod
    def from_values(cls, lookup: Callable[[str], str | None], airflow_home: str,
                    origin: Callable[[str], str] | None = None) -> RegionflowConfig:
        """Build from `lookup(option)`; an empty or missing value takes the option's default. A bad
        value raises `SpecError` naming ``[regionflow] <option>`` and, with `origin`, where it was set."""
        read: list[str] = []

        def get(name: str) -> str:
            read.append(name)
            return (lookup(name) or "").strip() or _DEFAULTS[name]

        try:
            return cls._from_get(get, airflow_home)
        except SpecError as error:
            culprit = read[-1] if read else None
            if origin is None or culprit is None or culprit not in str(error) or not (lookup(culprit) or "").strip():
                raise
            raise SpecError(f"{error} ({origin(culprit)})") from None

    @classmethod
    def _from_get(cls, get: Callable[[str], str], airflow_home: str) -> RegionflowConfig:
        hosts = get("hosts").strip()
        cluster = _hosts(hosts) if hosts else Cluster.local_default()
        backend = _choice("backend", get("backend"), BACKENDS)
        _check_conn_hosts(cluster, backend)
        bind_address = get("bind_address").strip()
        data_dir = _data_dir(get("data_dir").strip() or "regionflow-data", airflow_home)
        data_dir_shared = _choice("data_dir_shared", get("data_dir_shared"), DATA_DIR_SHARED_CHOICES)
        problem = (bind_address_problems(cluster, bind_address, drivers_here=backend == "session")
                   or data_dir_problem(cluster, data_dir, data_dir_shared))
        if problem is not None:
            raise SpecError(problem)
        return cls(
            cluster=cluster,
            data_dir=data_dir,
            store_url=get("store_url").strip() or f"sqlite:///{os.path.join(airflow_home, 'regionflow.db')}",
            mode=_mode(get("mode").strip()),
            max_shards=_declared_number("max_shards", get),
            blocklist_expiry=_declared_number("blocklist_expiry", get),
            resource_wait_timeout=_declared_number("resource_wait_timeout", get),
            elastic_wait=_declared_number("elastic_wait", get),
            spark_conf=_spark_conf(get("spark_conf")),
            spark_conn_id=get("spark_conn_id").strip() or None,
            speculation=parse_switch(get("speculation"), f"[{SECTION}] speculation"),
            speculation_config=_speculation_config(get),
            backend=backend,
            session_base_port=_declared_number("session_base_port", get),
            session_state_dir=get("session_state_dir").strip() or os.path.join(airflow_home, "regionflow-sessions"),
            slot_idle_timeout=_declared_number("slot_idle_timeout", get),
            lost_host_probe_interval=_declared_number("lost_host_probe_interval", get),
            partition_retention=_declared_number("partition_retention", get),
            bind_address=bind_address,
            data_dir_shared=data_dir_shared,
        )

    @property
    def blocks_lost_hosts(self) -> bool:
        """Whether a lost host gets a blocklist entry for every run: not with ``blocklist_expiry`` 0, nor on
        a one-host cluster, where the entry could only make the retry fail at once (the pool rejects a
        bulk whose every host is blocklisted) while the host may be back by then."""
        return self.blocklist_expiry > 0 and len(self.cluster) >= 2

    @property
    def largest_host_slots(self) -> int:
        return max(host.slots for host in self.cluster)


def _check_conn_hosts(cluster: Cluster, backend: str) -> None:
    for problem in filter(None, (backend_problem(host, backend) for host in cluster)):
        raise SpecError(f"[{SECTION}] hosts: {problem}")


def check_option_names(names: Iterable[str], origin: Callable[[str], str] | None = None) -> None:
    """Refuse an option of ``[regionflow]`` that regionflow does not declare (a typo would otherwise
    be ignored silently), naming the closest declared one and, with `origin`, where it was set."""
    for name in names:
        base, _, suffix = name.lower().rpartition("_")
        if suffix in ("cmd", "secret") and base in _BY_NAME and _BY_NAME[base].sensitive:
            continue  # Airflow's command or secrets-backend variant of a sensitive option
        if name.lower() in RENAMED:
            where = f"; {origin(name)}" if origin else ""
            raise SpecError(f"[{SECTION}] {name} was renamed {RENAMED[name.lower()]} (same meaning): rename it in "
                            f"airflow.cfg or AIRFLOW__{SECTION.upper()}__{RENAMED[name.lower()].upper()}{where}")
        if name.lower() not in _BY_NAME:
            where = f"; {origin(name)}" if origin else ""
            raise SpecError(f"[{SECTION}] {name} is not an option of regionflow"
                            f"{did_you_mean(name.lower(), list(_BY_NAME))}; the options are: {', '.join(_BY_NAME)} "
                            f"(set in airflow.cfg or as AIRFLOW__{SECTION.upper()}__<OPTION>){where}")


_JSON_TYPES = {"string": "string", "integer": "integer", "float": "number", "boolean": "boolean"}


def config_schema() -> dict[str, Any]:
    """The ``[regionflow]`` options as a JSON Schema (their declaration, `OPTIONS`, is the model;
    `RegionflowConfig.from_values` applies the ranges)."""
    return {
        "type": "object",
        "title": f"[{SECTION}] options",
        "description": "regionflow's section of airflow.cfg (or AIRFLOW__REGIONFLOW__<OPTION> variables); every "
                       "value is text there, read as the type given",
        "properties": {option.name: _option_schema(option) for option in OPTIONS},
        "additionalProperties": False,
    }


def _declared_number(name: str, get: Callable[[str], str]) -> Any:
    """Option `name` read as its declared type within its declared range."""
    option = _BY_NAME[name]
    return _number(name, get(name), int if option.type == "integer" else float, option.minimum or 0,
                   above=option.above, maximum=option.maximum)


def _option_schema(option: Option) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": _JSON_TYPES.get(option.type, "string"), "description": option.description}
    if option.default:
        schema["default"] = option.default
    if option.example:
        schema["examples"] = [option.example]
    if option.minimum is not None:
        schema["exclusiveMinimum" if option.above else "minimum"] = option.minimum
    if option.maximum is not None:
        schema["maximum"] = option.maximum
    if option.choices:
        schema["enum"] = list(option.choices)
    return schema


def _number(name: str, text: str, kind: type, minimum: float, *, above: bool = False,
            maximum: float | None = None) -> Any:
    """`text` as a finite `kind` of at least `minimum` (greater than it with `above`), at most `maximum`."""
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise SpecError(f"[{SECTION}] {name} = {text!r} is not a {kind.__name__}") from None
    if not math.isfinite(value):
        raise SpecError(f"[{SECTION}] {name} = {text!r} must be a finite number")
    if value < minimum or (above and value == minimum):
        raise SpecError(f"[{SECTION}] {name} = {value} must be {'greater than' if above else 'at least'} {minimum}")
    if maximum is not None and value > maximum:
        raise SpecError(f"[{SECTION}] {name} = {value} must be at most {maximum}")
    return value


_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")  # two letters at least: 'C:' is a drive, not a scheme


def _data_dir(text: str, airflow_home: str) -> str:
    """``[regionflow] data_dir``: a URI as given; a path with ``~`` expanded and, when relative, joined to
    AIRFLOW_HOME (not to each process's working directory)."""
    if _URI_SCHEME.match(text):
        return text
    return os.path.abspath(os.path.join(airflow_home, os.path.expanduser(text)))


def _hosts(text: str) -> Cluster:
    try:
        return parse_cluster(text)
    except RegionflowError as error:
        raise SpecError(f"[{SECTION}] hosts = {text!r}: {error}") from None


def _mode(text: str) -> ExchangeMode:
    try:
        return ExchangeMode.parse(text or None)
    except RegionflowError as error:
        raise SpecError(f"[{SECTION}] mode: {error}") from None


def _choice(name: str, text: str, choices: tuple[str, ...]) -> str:
    value = text.strip().lower()
    if value not in choices:
        raise SpecError(f"[{SECTION}] {name} = {text!r}; use one of: {', '.join(choices)}")
    return value


SPECULATION_PREFIX = "speculation_"


def _speculation_config(get: Callable[[str], str]) -> SpeculationConfig:
    """The detector defaults from the ``speculation_*`` options; an error names the option at fault."""
    values = {}
    for option in OPTIONS:
        if not option.name.startswith(SPECULATION_PREFIX):
            continue
        name = option.name[len(SPECULATION_PREFIX):]
        text = get(option.name)
        try:  # one option at a time, so the error names the option at fault
            values[name] = getattr(SpeculationConfig.from_mapping({name: text}), name)
        except SpecError as error:
            raise SpecError(f"[{SECTION}] {option.name} = {text!r}: {error}") from None
    return SpeculationConfig(**values)


def _spark_conf(text: str) -> dict[str, str]:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError as error:
        raise SpecError(f"[{SECTION}] spark_conf is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise SpecError(f"[{SECTION}] spark_conf must be a JSON object of Spark conf keys, got {text!r}")
    nested = sorted(k for k, v in value.items() if isinstance(v, (dict, list)) or v is None)
    if nested:
        raise SpecError(f"[{SECTION}] spark_conf: {', '.join(repr(k) for k in nested)} must be a string, number or "
                        f"boolean, like every Spark conf value (got {value[nested[0]]!r})")
    return {str(k): (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in value.items()}
