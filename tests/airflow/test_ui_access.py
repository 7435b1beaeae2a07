"""Per-DAG access to the UI plugin, decided by Airflow's auth manager: the simple auth manager in
multi-team mode (a real Airflow feature) gives DAG bundle ``secret`` to team ``finance``; user ``ana``
(viewer, team ``ops``) may read DAG ``ui_open`` but not ``ui_secret``. A stack of its own (api-server
and dag-processor: nothing runs here), since multi-team mode changes how Airflow resolves every DAG.
The queue entries are written through the store's own ``record_waiting`` (the executor's call)."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from regionflow.store import RegionflowStore
from regionflow.testing import EmbeddedAirflow

DAGS = os.path.join(os.path.dirname(__file__), "dags_access")
LOCAL_BUNDLE = "airflow.dag_processing.bundles.local.LocalDagBundle"
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow-access")
    dags = home / "dags"
    shutil.copytree(DAGS, dags)
    descriptor = os.open(home / "simple_auth_manager_passwords.json", os.O_WRONLY | os.O_CREAT, 0o600)
    with os.fdopen(descriptor, "w") as passwords:
        json.dump({"ana": "ana-password"}, passwords)
    bundles = [{"name": "open", "classpath": LOCAL_BUNDLE, "kwargs": {"path": str(dags / "open")}},
               {"name": "secret", "classpath": LOCAL_BUNDLE, "kwargs": {"path": str(dags / "secret")},
                "team_name": "finance"}]
    config = {"core": {"multi_team": "True", "simple_auth_manager_users": "admin:admin,ana:viewer:ops"},
              "dag_processor": {"dag_bundle_config_list": json.dumps(bundles)}}
    airflow = EmbeddedAirflow(str(home), str(dags), components=("api-server", "dag-processor"),
                              regionflow_options={"hosts": "localhost:slots=2", "backend": "submit"},
                              extra_config=config,
                              setup_commands=[["teams", "create", "finance"], ["teams", "create", "ops"]])
    with airflow:
        for dag_id in ("ui_open", "ui_secret"):
            airflow.wait_for_dag(dag_id)
        yield airflow


@pytest.fixture(scope="module")
def ana(stack):
    with stack.http_client("ana", "ana-password") as http:
        yield http


@pytest.fixture(scope="module")
def admin(stack):
    with stack.http_client() as http:
        yield http


@pytest.mark.parametrize("path, for_admin", [("/regionflow/api/dags/{dag}/plan", 200),
                                             ("/regionflow/api/dags/{dag}/runs/r1/attempts", 404),  # no run r1
                                             ("/regionflow/api/dags/{dag}/runs/r1/timeline", 404)])
def test_a_user_outside_the_dags_team_gets_403(ana, admin, path, for_admin):
    assert ana.get(path.format(dag="ui_secret")).status_code == 403
    assert admin.get(path.format(dag="ui_secret")).status_code == for_admin


def test_a_user_reads_the_plan_of_a_dag_without_a_team(ana):
    response = ana.get("/regionflow/api/dags/ui_open/plan")
    assert response.status_code == 200, response.text
    assert [r["vertices"] for r in response.json()["regions"]] == [["source"]]


def test_the_queue_hides_what_a_user_may_not_read_and_counts_it(stack, ana, admin):
    store = RegionflowStore.from_config(f"sqlite:///{stack.home}/regionflow.db")
    for bulk, dag_id in (("s1", "ui_secret"), ("o1", "ui_open")):
        store.record_waiting(bulk, dag_id=dag_id, run_id="r1", task_id="source", try_number=1,
                             label=f"{dag_id}.source", requests=[{}])
    for_ana = ana.get("/regionflow/api/cluster").json()
    assert [(q["dag_id"], q["position"]) for q in for_ana["queue"]] == [("ui_open", 2)]
    assert for_ana["queue_hidden"] == 1
    for_admin = admin.get("/regionflow/api/cluster").json()
    assert [q["dag_id"] for q in for_admin["queue"]] == ["ui_secret", "ui_open"] and for_admin["queue_hidden"] == 0
