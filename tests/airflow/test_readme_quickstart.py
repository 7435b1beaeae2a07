"""The README's quickstart, as written: its airflow.cfg block and its DAG file, taken from the README, on a fresh
Airflow home with the real stack (api-server, scheduler, dag-processor, triggerer, the RegionExecutor) and no
Spark server started beforehand: the first region task starts it, as in a plain installation. The run succeeds
with the two region tasks the README names and the sink partition it promises, whose rows are the right answer.
So the README cannot rot."""
import configparser
import os
import re

import pyarrow.parquet as pq
import pytest

from regionflow.testing import EmbeddedAirflow

pytestmark = pytest.mark.timeout(900)
README = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "README.md")
LOGICAL_DATE = "2026-01-02"


def readme_block(marker, language):
    """The fenced block right after the README's ``<!-- marker: ... -->`` comment."""
    with open(README, encoding="utf-8") as handle:
        found = re.search(rf"<!-- {marker}:[^>]*-->\s*```{language}\n(.*?)```", handle.read(), re.DOTALL)
    assert found, f"README.md has no {language} block after <!-- {marker}: ... -->"
    return found.group(1)


def test_the_readme_quickstart_runs_on_a_fresh_airflow(tmp_path):
    parser = configparser.ConfigParser()
    parser.read_string(readme_block("quickstart-config", "ini"))
    sections = {name: dict(parser[name]) for name in parser.sections()}
    core = sections.pop("core")
    executor, parallelism = core.pop("executor"), int(core.pop("parallelism"))
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "quickstart.py").write_text(readme_block("quickstart-dag", "python"))
    home = tmp_path / "home"
    with EmbeddedAirflow(str(home), str(dags), executor=executor, parallelism=parallelism,
                         regionflow_options=sections.pop("regionflow"), extra_config={"core": core, **sections},
                         start_servers=False) as stack:
        assert [status.state for status in stack.session_servers.status()] == ["down"]
        stack.wait_for_dag("quickstart")
        stack.unpause("quickstart")
        run_id = stack.trigger("quickstart", logical_date=f"{LOGICAL_DATE}T00:00:00+00:00")
        assert stack.wait_for_run("quickstart", run_id, timeout=600) == "success"
        tasks = {ti["task_id"]: ti["state"] for ti in stack.task_instances("quickstart", run_id)}
        assert tasks == {"numbers__squares": "success", "totals": "success"}
        assert [status.state for status in stack.session_servers.status()] == ["up"]  # the first region started it
    sink = home / "regionflow-data" / "sinks" / "quickstart" / "totals" / f"ds={LOGICAL_DATE}"
    rows = {row["digit"]: (row["total"], row["count"]) for row in pq.read_table(str(sink)).to_pylist()}
    assert rows == {digit: (sum(i * i for i in range(digit, 100_000, 10)), 10_000) for digit in range(10)}
