"""The errors of the embedded Airflow stack (`regionflow.testing.EmbeddedAirflow`)."""
from __future__ import annotations

from ..core.errors import RegionflowError


class EmbeddedAirflowError(RegionflowError):
    """The embedded Airflow stack failed; the message names the component and its log file."""


class ComponentFailed(EmbeddedAirflowError):
    """A component (or ``airflow db migrate``) exited while it should be running or succeed."""

    def __init__(self, component: str, log_path: str, message: str) -> None:
        super().__init__(message)
        self.component = component
        self.log_path = log_path


class StartTimeout(EmbeddedAirflowError):
    """The stack did not become healthy within the start timeout."""


class ApiError(EmbeddedAirflowError):
    """A REST API call answered with an unexpected status."""

    def __init__(self, method: str, url: str, status: int, body: str, log_path: str) -> None:
        super().__init__(
            f"api-server: {method} {url} answered {status}: {body[:2000]} (api-server log: {log_path})"
        )
        self.status = status


class WaitTimeout(EmbeddedAirflowError):
    """A DAG, an import error or a DAG run did not reach the awaited state in time."""


__all__ = ["ApiError", "ComponentFailed", "EmbeddedAirflowError", "StartTimeout", "WaitTimeout"]
