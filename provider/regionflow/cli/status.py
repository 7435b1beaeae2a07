"""``regionflow status``: the slot pool of a cluster as regionflow's store records it (hosts with slots
used and free, the FIFO queue and why each region waits, the blocklist, the grants per DAG run), or,
given a DAG run, its region tasks' attempts, copies and speculation figures, and the parallelism decided for
the run of each adaptive region cut into shards (beside its declared range).

`status_output` is the one implementation: ``regionflow status`` calls it with its options,
``airflow regionflow status`` (`regionflow.cli.airflow_handlers`) with the ``[regionflow]`` section. The
figures are the views of `regionflow.ui.views`, which the Airflow UI plugin shows too. The store
(SQLAlchemy) is imported when the command runs.
"""
from __future__ import annotations

import argparse
import json
import os
from typing import Any

from ..core.errors import SpecError
from ..output import print_document
from .common import HOSTS_VARIABLE, add_cluster_options, add_store_url_option, cluster_from_args, store_url_from_args


def register(commands: Any) -> None:
    """Register ``status [DAG_ID RUN_ID]`` on the CLI's subcommands."""
    status = commands.add_parser("status", help="the slot pool (hosts, FIFO queue, blocklist, grants per run); "
                                                "with DAG_ID RUN_ID: attempts, speculation metrics and blocklist "
                                                "of that DAG run")
    status.add_argument("dag_id", nargs="?", default=None)
    status.add_argument("run_id", nargs="?", default=None)
    add_store_url_option(status)
    add_cluster_options(status)
    status.add_argument("--format", choices=("text", "json"), default="text")
    status.set_defaults(handler=run_status)


def run_status(args: argparse.Namespace) -> int:
    """``regionflow status``: the store from ``--store-url`` (else the environment, else the default);
    for the slot pool, the hosts from ``--hosts``/``--slots``, else ``$AIRFLOW__REGIONFLOW__HOSTS``."""
    if args.hosts is None and args.slots is None and os.environ.get(HOSTS_VARIABLE, "").strip():
        args.hosts = os.environ[HOSTS_VARIABLE]
    url = store_url_from_args(args)
    cluster = None if args.dag_id is not None else cluster_from_args(args)
    print_document(status_output(url, cluster, args.dag_id, args.run_id, args.format))
    return 0


def status_output(store_url: str, cluster: Any, dag_id: str | None = None, run_id: str | None = None,
                  output_format: str = "text") -> str:
    """What ``status`` prints. Without `dag_id`: the slot pool of `cluster` (a `Cluster`) as the store
    at `store_url` records it; a store that does not exist yet (nothing ran) is an empty pool, and is
    not created. With `dag_id` and `run_id`: that run's view; a missing store or run is an error."""
    from ..store import RegionflowStore, mask_url, store_exists
    from ..ui.views import cluster_view, run_view

    if (dag_id is None) != (run_id is None):
        raise SpecError("give both DAG_ID and RUN_ID for one DAG run, or neither for the slot pool")
    exists = store_exists(store_url)  # a read-only command creates no store where a mistyped URL points
    if dag_id is None:
        view = cluster_view(RegionflowStore.from_config(store_url) if exists else None, cluster)
        view["store"] = mask_url(store_url)
        view["store_exists"] = exists
        return json.dumps(view, indent=2) if output_format == "json" else cluster_text(view)
    if not exists:
        raise SpecError(f"no regionflow store at {mask_url(store_url)!r} (from --store-url / [regionflow] "
                        f"store_url); check the path")
    store = RegionflowStore.from_config(store_url)
    data = run_view(store, dag_id, run_id or "")
    if not data["tasks"] and not data["decisions"]:
        raise SpecError(f"regionflow's store at {store.url!r} has nothing for DAG {dag_id!r} run {run_id!r}; "
                        f"check the ids (and the store URL)")
    return json.dumps(data, indent=2) if output_format == "json" else run_text(data)


def cluster_text(view: dict[str, Any]) -> str:
    """The slot pool view (`regionflow.ui.views.cluster_view`) as text for a terminal."""
    slots = view["slots"]
    store = view.get("store", "?")
    lines = [f"slot pool: {slots['total']} slots, {slots['used']} used, {slots['free']} free "
             f"(store {store}{'' if view.get('store_exists', True) else ', not created yet: nothing has run'})"]
    lines.append("hosts:")
    lines += [f"  {h['name']}: {h['used']}/{h['slots']} slots used, {h['free']} free, "
              f"slot [{h['slot_profile']}] on {h['master']}" for h in view["hosts"]]
    lines.append("queue (FIFO, oldest first):" + ("" if view["queue"] else " empty"))
    for entry in view["queue"]:
        lines.append(f"  {entry['position']}. {_grant_name(entry)} wants {entry['slots_requested']} slot(s), "
                     f"waiting {entry['age_s']:g} s: {entry['why']}")
    if view.get("queue_hidden"):
        lines.append(f"  ({view['queue_hidden']} more of DAGs not shown)")
    lines.append("blocklist:" + ("" if view["blocklist"] else " empty"))
    lines += [f"  {b['host']} for run {b['job_id']}, {b['expires_in_s']:g} s more ({b['reason']})"
              for b in view["blocklist"]]
    lines.append("grants:" + ("" if view["grants"] else " none"))
    for run in view["grants"]:
        lines.append(f"  DAG {run['dag_id']} run {run['run_id']}:")
        lines += [f"    {_grant_name(g)}: {g['slots_requested']} slot(s) on {', '.join(g['hosts'])}, "
                  f"held {g['held_s']:g} s" for g in run["grants"]]
    schedulers = view.get("schedulers", [])
    lines.append("schedulers sharing the pool:" + ("" if schedulers else " none"))
    lines += [f"  {s['scheduler_id']}: heartbeat {s['heartbeat_age_s']:g} s ago, {s['state']}" for s in schedulers]
    return "\n".join(lines)


def _grant_name(grant: dict[str, Any]) -> str:
    shard = f"[{grant['map_index']}]" if grant["map_index"] >= 0 else ""
    return f"{grant['dag_id']}/{grant['run_id']} {grant['task_id']}{shard} try {grant['try_number']}"


def run_text(data: dict[str, Any]) -> str:
    """One DAG run's view (`regionflow.ui.views.run_view`) as text for a terminal."""
    lines = [f"DAG {data['dag_id']} run {data['run_id']}"]
    for task_id, task in sorted(data["tasks"].items()):
        lines.append(f"{task_id}:")
        if task["metrics"]:
            lines.append("  metrics:")
            lines += [f"    {name} = {value:g}" for name, value in sorted(task["metrics"].items())]
        if task["attempts"]:
            lines.append("  attempts:")
            for a in sorted(task["attempts"], key=lambda a: (a["shard"], a["attempt"])):
                duration = "" if a["duration_s"] is None else f" {a['duration_s']:.1f} s"
                lines.append(f"    [{a['shard']}] {a['attempt']} on {a['host']}: {a['state']}{duration}"
                             f"{' speculative' if a['speculative'] else ''}{' WINNER' if a['winner'] else ''}")
        for c in task["copies"]:
            lines.append(f"  copy request {c['request']} for shard {c['shard']}: {c['state']}"
                         f"{'' if not c['attempt'] else ' as ' + c['attempt'] + ' on ' + str(c['host'])}"
                         f" (avoiding {', '.join(c['excluded_hosts']) or 'none'})"
                         f"{'' if not c['message'] else ': ' + c['message']}")
    for task_id, decision in sorted(data.get("decisions", {}).items()):
        lines.append(f"{task_id}: decided for this run: {decision_text(decision)}")
    if data["blocklist"]:
        lines.append("blocklist:")
        lines += [f"  {b['host']} for {b['expires_in_s']:g} s more ({b['reason']})" for b in data["blocklist"]]
    return "\n".join(lines)


def decision_text(decision: dict[str, Any]) -> str:
    """One region's decision (`regionflow.ui.views.decision_view`) in a line: each vertex's value and range."""
    values = ", ".join(f"{name}={v['decided']} (range {v['range'][0]}-{v['range'][1]})"
                       for name, v in decision["vertices"].items())
    read = "" if decision["input_bytes"] is None else f", {decision['input_bytes']} bytes read"
    return f"{values}; {decision['shards']} shard(s){read}"


def hosts_output(cluster: Any, output_format: str = "text") -> str:
    """The hosts of a `Cluster` as the slot pool sees them: per line its name, slots, one slot's
    profile and where Spark runs (JSON: the host objects of ``[regionflow] hosts``)."""
    if output_format == "json":
        return json.dumps(cluster.to_dicts(), indent=2)
    from ..spark.launch.targets import spark_target

    return "\n".join(f"{host.describe()} on {spark_target(host).master}" for host in cluster)


__all__ = ["cluster_text", "decision_text", "hosts_output", "register", "run_status", "run_text", "status_output"]
