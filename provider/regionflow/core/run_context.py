"""The run a job runs in, as its vertex functions see it (`ctx.logical_date`, `ctx.params`, ...).

`RunContext` holds what Airflow gives an operator's ``execute(context)`` about its DAG run: the logical
date, the data interval, the params (the DAG's params merged with ``dag_run.conf``, as Airflow merges
them), the DAG id, the run id, the try number and the map index. It is built once per task instance try
(`from_airflow`) or per ``regionflow run`` (its ``--logical-date``, ``--data-interval``, ``--param``), then
carried as JSON in the unit task an attempt runs, so a speculative copy sees exactly its original's values
instead of values computed again. Pure Python: no Airflow, no PySpark.

Outside Airflow with no ``--logical-date``, the logical date and the data interval are None, and so are
``ds`` and ``ds_nodash`` (Airflow 3's manual runs may have no logical date either).
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from .errors import SpecError

DATETIME_FIELDS = ("logical_date", "data_interval_start", "data_interval_end")


@dataclass(frozen=True)
class RunContext:
    """One DAG run's values for its vertex functions; datetimes are timezone-aware (or None)."""

    dag_id: str | None = None
    run_id: str | None = None
    logical_date: datetime | None = None
    data_interval_start: datetime | None = None
    data_interval_end: datetime | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    try_number: int | None = None
    map_index: int = -1

    def __post_init__(self) -> None:
        for name in DATETIME_FIELDS:
            value = getattr(self, name)
            if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
                raise SpecError(f"run context {name} {value!r} must be a timezone-aware datetime or None")
        try:
            json.dumps(dict(self.params))
        except (TypeError, ValueError) as error:
            raise SpecError(f"run context params must be JSON values: {error}") from None

    @property
    def ds(self) -> str | None:
        """The logical date as ``YYYY-MM-DD`` (Airflow's ``ds``), or None without a logical date."""
        return self.logical_date.strftime("%Y-%m-%d") if self.logical_date else None

    @property
    def ds_nodash(self) -> str | None:
        return self.logical_date.strftime("%Y%m%d") if self.logical_date else None

    def with_try(self, try_number: int) -> RunContext:
        return replace(self, try_number=try_number)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"dag_id": self.dag_id, "run_id": self.run_id, "params": dict(self.params),
                                "try_number": self.try_number, "map_index": self.map_index}
        for name in DATETIME_FIELDS:
            value = getattr(self, name)
            data[name] = value.isoformat() if value is not None else None
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> RunContext:
        if not data:
            return cls()
        values = dict(data)
        for name in DATETIME_FIELDS:
            if values.get(name) is not None:
                values[name] = parse_datetime(values[name], name)
        return cls(**values)

    @classmethod
    def from_airflow(cls, context: Mapping[str, Any]) -> RunContext:
        """The values of an Airflow task context (``execute(context)``): its ``params`` are already the DAG's
        params merged with ``dag_run.conf``. Pendulum datetimes become plain `datetime` objects."""
        ti = context.get("ti")
        dag = context.get("dag")
        params = context.get("params") or {}
        return cls(
            dag_id=getattr(dag, "dag_id", None) or getattr(ti, "dag_id", None),
            run_id=context.get("run_id"),
            logical_date=_plain(context.get("logical_date")),
            data_interval_start=_plain(context.get("data_interval_start")),
            data_interval_end=_plain(context.get("data_interval_end")),
            params=json.loads(json.dumps({key: params[key] for key in params}, default=str)),
            try_number=getattr(ti, "try_number", None),
            map_index=int(getattr(ti, "map_index", -1) if getattr(ti, "map_index", None) is not None else -1),
        )

    def template_variables(self) -> dict[str, Any]:
        """What a job spec's templates may use (`core.templates`): Airflow's names for the same values. As
        in Airflow's context, a run without a logical date has no ``ds`` (nor the other date values), so a
        template using one fails instead of rendering ``None``."""
        variables: dict[str, Any] = {"params": dict(self.params), "dag_id": self.dag_id, "run_id": self.run_id}
        logical = self.logical_date
        if logical is not None:
            variables.update(ds=self.ds, ds_nodash=self.ds_nodash, logical_date=logical, ts=logical.isoformat(),
                             ts_nodash=logical.strftime("%Y%m%dT%H%M%S"))
        if self.data_interval_start is not None and self.data_interval_end is not None:
            variables.update(data_interval_start=self.data_interval_start, data_interval_end=self.data_interval_end)
        return variables


def parse_datetime(text: Any, option: str) -> datetime:
    """An ISO date or datetime; without a zone it is UTC (Airflow's default timezone)."""
    if isinstance(text, datetime):
        value = text
    else:
        try:
            value = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
        except ValueError:
            raise SpecError(f"{option} {text!r} is not an ISO date or datetime; give e.g. 2026-01-02 or "
                            f"2026-01-02T00:00:00+00:00") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def parse_param(item: str) -> tuple[str, Any]:
    """``--param KEY=VALUE``: the value is JSON (``n=3``, ``name='"x"'``, ``days='[1, 2]'``)."""
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise SpecError(f"--param {item!r} must look like KEY=VALUE with a JSON value, e.g. --param limit=10")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError as error:
        raise SpecError(f"--param {key}: {value!r} is not a JSON value ({error.msg}); quote a string as JSON, "
                        f"e.g. --param '{key}=\"{value}\"'") from None


def cli_context(logical_date: str | None, interval: list[str] | None, params: list[str], *,
                dag_id: str | None = None, run_id: str | None = None) -> RunContext:
    """The run context of ``regionflow run``: the data interval defaults to [logical date, logical date]
    (Airflow 3's interval of a manual or cron-triggered run); no logical date: None throughout."""
    logical = parse_datetime(logical_date, "--logical-date") if logical_date else None
    start: datetime | None
    end: datetime | None
    if interval:
        start, end = (parse_datetime(v, "--data-interval") for v in interval)
        if end < start:
            raise SpecError(f"--data-interval {interval[0]} {interval[1]}: the end is before the start")
    else:
        start = end = logical
    values = dict(parse_param(item) for item in params)
    return RunContext(dag_id=dag_id, run_id=run_id, logical_date=logical, data_interval_start=start,
                      data_interval_end=end, params=values, try_number=1)


def _plain(value: Any) -> datetime | None:
    """A pendulum (or any) datetime as a stdlib one; None stays None."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise SpecError(f"run context datetime {value!r} is not a datetime")
    plain = datetime.fromisoformat(value.isoformat())
    return plain if plain.tzinfo is not None else plain.replace(tzinfo=UTC)


__all__ = ["RunContext", "cli_context", "parse_datetime", "parse_param"]
