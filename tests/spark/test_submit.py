"""Tests of regionflow.spark.launch.submit: pure submit arguments and py-files (milliseconds), the real
SparkSubmitHook path with a fake spark-submit (milliseconds), and two real local submissions."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import zipfile
from re import escape as re_escape

import pytest

from regionflow.core.errors import RegionflowError
from regionflow.core.resources import UNKNOWN, ResourceProfile
from regionflow.processes import process_group_members
from regionflow.spark.launch.pyfiles import build_py_files
from regionflow.spark.launch.submit import RegionSubmission, SubmissionFailed, extract_python_traceback, pinned_cpus
from regionflow.spark.launch.submit_args import (
    SubmitConfigError,
    build_submit_kwargs,
    connection_env,
    managed_conn_id,
    spark_home,
)

ONE_CORE_SLOT = ResourceProfile.of(cpu=1, heap_mib=1024)
APP = "/jobs/region.py"


def kwargs_for(master: str = "local[*]", slots: int = 2, profile: ResourceProfile = ONE_CORE_SLOT, **overrides):
    args = dict(application=APP, application_args=["--task", "t.json"], master=master, slots=slots,
                slot_profile=profile, job_conf=None, py_files=[], name="job region-3")
    args.update(overrides)
    return build_submit_kwargs(**args)


# ---- build_submit_kwargs: masters and sizing -----------------------------------------------------


@pytest.mark.parametrize("master", ["local", "local[*]", "local[8]", " local[1] "])
def test_local_masters_become_local_k_with_k_the_granted_slots(master):
    kwargs = kwargs_for(master, slots=3)
    assert kwargs["conf"]["spark.master"] == "local[3]"
    assert kwargs["conn_id"] == "regionflow_local_3"
    assert kwargs["driver_memory"] == "3072m"
    assert "total_executor_cores" not in kwargs and "executor_memory" not in kwargs


def test_standalone_master_gets_one_executor_per_slot():
    kwargs = kwargs_for("spark://127.0.0.1:7077", slots=3)
    assert kwargs["conf"]["spark.master"] == "spark://127.0.0.1:7077"
    assert kwargs["conn_id"] == "regionflow_spark_127_0_0_1_7077"
    assert (kwargs["total_executor_cores"], kwargs["executor_cores"], kwargs["executor_memory"]) == (3, 1, "1024m")
    assert kwargs["conf"]["spark.dynamicAllocation.enabled"] == "false"
    assert "spark.task.cpus" not in kwargs["conf"] and "driver_memory" not in kwargs


def test_multi_core_slots_size_executors_and_run_one_task_per_slot():
    kwargs = kwargs_for("spark://127.0.0.1:7077", slots=2, profile=ResourceProfile.of(cpu=2, heap_mib=2048))
    assert (kwargs["total_executor_cores"], kwargs["executor_cores"]) == (4, 2)
    assert kwargs["conf"]["spark.task.cpus"] == "2"


@pytest.mark.parametrize("cpu", [0, 0.25, 1])
def test_slots_with_at_most_one_core_get_one_core_executors(cpu):
    kwargs = kwargs_for("spark://127.0.0.1:7077", slots=2, profile=ResourceProfile.of(cpu=cpu, heap_mib=1024))
    assert (kwargs["total_executor_cores"], kwargs["executor_cores"]) == (2, 1)


def test_unknown_profile_leaves_memory_to_spark_defaults():
    local = kwargs_for("local[2]", profile=UNKNOWN)
    standalone = kwargs_for("spark://127.0.0.1:7077", profile=UNKNOWN)
    assert "driver_memory" not in local and "executor_memory" not in standalone
    assert (standalone["total_executor_cores"], standalone["executor_cores"]) == (2, 1)
    assert not any("memory" in key for key in {**local["conf"], **standalone["conf"]})


def test_off_heap_memory_enables_spark_off_heap_per_executor_and_per_local_jvm():
    profile = ResourceProfile.of(cpu=1, heap_mib=1024, off_heap_mib=256)
    standalone = kwargs_for("spark://127.0.0.1:7077", slots=2, profile=profile)["conf"]
    local = kwargs_for("local[*]", slots=2, profile=profile)["conf"]
    assert (standalone["spark.memory.offHeap.enabled"], standalone["spark.memory.offHeap.size"]) == ("true", "256m")
    assert local["spark.memory.offHeap.size"] == "512m"


def test_managed_memory_grows_the_heap_and_sets_the_unified_memory_fraction():
    profile = ResourceProfile.of(cpu=1, heap_mib=1024, managed_mib=1024)
    kwargs = kwargs_for("spark://127.0.0.1:7077", slots=1, profile=profile)
    assert kwargs["executor_memory"] == "2048m"
    # unified region = fraction x (2048 - 300 reserved) = the 1024 MiB of managed memory
    assert kwargs["conf"]["spark.memory.fraction"] == f"{1024 / 1748:.4f}"


def test_managed_memory_fraction_is_capped_for_tiny_heaps_and_small_memory_is_raised():
    kwargs = kwargs_for("spark://127.0.0.1:7077", slots=1, profile=ResourceProfile.of(heap_mib=100, managed_mib=400))
    assert kwargs["executor_memory"] == "512m"
    assert kwargs["conf"]["spark.memory.fraction"] == "0.9000"
    assert kwargs_for("local", slots=1, profile=ResourceProfile.of(heap_mib=64))["driver_memory"] == "512m"


def test_gpus_become_executor_and_task_resource_amounts_on_standalone_only():
    whole = kwargs_for("spark://127.0.0.1:7077", profile=ResourceProfile.of(cpu=1, heap_mib=1024, gpu=1))["conf"]
    half = kwargs_for("spark://127.0.0.1:7077", profile=ResourceProfile.of(cpu=1, heap_mib=1024, gpu=0.5))["conf"]
    local = kwargs_for("local[2]", profile=ResourceProfile.of(cpu=1, heap_mib=1024, gpu=1))["conf"]
    assert (whole["spark.executor.resource.gpu.amount"], whole["spark.task.resource.gpu.amount"]) == ("1", "1")
    assert (half["spark.executor.resource.gpu.amount"], half["spark.task.resource.gpu.amount"]) == ("1", "0.5")
    assert not any("resource" in key for key in local)


def test_other_extended_resources_map_like_gpus():
    conf = kwargs_for("spark://127.0.0.1:7077", profile=ResourceProfile.of(cpu=1, heap_mib=1024, fpga=2))["conf"]
    assert conf["spark.executor.resource.fpga.amount"] == "2"


# ---- build_submit_kwargs: loopback, name, conf, env, files ---------------------------------------


@pytest.mark.parametrize("master", ["local[2]", "spark://127.0.0.1:7077", "spark://localhost:7077"])
def test_loopback_masters_bind_the_driver_to_127_0_0_1_and_disable_the_ui(master):
    kwargs = kwargs_for(master)
    assert kwargs["conf"]["spark.driver.bindAddress"] == "127.0.0.1"
    assert kwargs["conf"]["spark.driver.host"] == "127.0.0.1"
    assert kwargs["conf"]["spark.ui.enabled"] == "false"
    assert kwargs["env_vars"]["SPARK_LOCAL_IP"] == "127.0.0.1"


def test_remote_masters_keep_the_drivers_address_reachable():
    kwargs = kwargs_for("spark://spark-master.example.com:7077")
    assert "spark.driver.host" not in kwargs["conf"] and "SPARK_LOCAL_IP" not in kwargs["env_vars"]
    assert kwargs["conf"]["spark.ui.enabled"] == "false"


def test_child_environment_names_spark_home_and_this_python():
    env = kwargs_for()["env_vars"]
    assert env["SPARK_HOME"] == spark_home()
    assert os.path.isfile(os.path.join(env["SPARK_HOME"], "bin", "spark-submit"))
    assert env["PYSPARK_PYTHON"] == env["PYSPARK_DRIVER_PYTHON"] == sys.executable
    assert kwargs_for()["spark_binary"] == os.path.join(spark_home(), "bin", "spark-submit")


def test_user_env_vars_are_merged_and_may_choose_the_python_but_not_spark_home():
    env = kwargs_for(env_vars={"MY_FLAG": "1", "PYSPARK_PYTHON": "/opt/py/bin/python"})["env_vars"]
    assert (env["MY_FLAG"], env["PYSPARK_PYTHON"]) == ("1", "/opt/py/bin/python")
    with pytest.raises(SubmitConfigError, match="SPARK_HOME"):
        kwargs_for(env_vars={"SPARK_HOME": "/opt/spark"})


def test_name_includes_the_region_name():
    assert kwargs_for(name="orders map#2")["name"] == "regionflow orders map#2"
    assert kwargs_for(name="regionflow orders map#2 a1")["name"] == "regionflow orders map#2 a1"


def test_job_conf_passes_through_as_strings():
    conf = kwargs_for(job_conf={"spark.sql.shuffle.partitions": 4, "spark.eventLog.enabled": True})["conf"]
    assert conf["spark.sql.shuffle.partitions"] == "4" and conf["spark.eventLog.enabled"] == "true"


def test_job_conf_may_repeat_an_owned_key_with_the_same_value():
    kwargs = kwargs_for("spark://127.0.0.1:7077", slots=2,
                        job_conf={"spark.cores.max": "2", "spark.ui.enabled": "FALSE"})
    assert kwargs["total_executor_cores"] == 2 and "spark.cores.max" not in kwargs["conf"]


@pytest.mark.parametrize("key, value", [
    ("spark.cores.max", "8"),
    ("spark.executor.memory", "4g"),
    ("spark.master", "yarn"),
    ("spark.ui.enabled", "true"),
    ("spark.dynamicAllocation.enabled", "true"),
    ("spark.app.name", "other"),
])
def test_job_conf_conflicting_with_the_grant_is_an_error_naming_the_key(key, value):
    with pytest.raises(SubmitConfigError, match=key.replace(".", r"\.")) as error:
        kwargs_for("spark://127.0.0.1:7077", slots=2, job_conf={key: value})
    assert "drop" in str(error.value) and isinstance(error.value, RegionflowError)


def test_keys_regionflow_does_not_set_are_free_for_the_job():
    kwargs = kwargs_for("local[2]", profile=UNKNOWN, job_conf={"spark.executor.memory": "4g"})
    assert kwargs["executor_memory"] == "4g"


@pytest.mark.parametrize("job_conf", [{"": "x"}, {"spark.x": None}, {3: "x"}])
def test_malformed_job_conf_is_an_error(job_conf):
    with pytest.raises(SubmitConfigError):
        kwargs_for(job_conf=job_conf)


@pytest.mark.parametrize("slots", [0, -1, True, 1.5, "2"])
def test_slots_must_be_a_whole_number_of_at_least_one(slots):
    with pytest.raises(SubmitConfigError, match="slots"):
        kwargs_for(slots=slots)


@pytest.mark.parametrize("master", ["yarn-cluster", "k8s://", "mesos://m:5050", "local[2,3]", "", "spark://h"])
def test_unsupported_masters_are_errors_naming_the_master(master):
    with pytest.raises(SubmitConfigError, match="master") as error:
        kwargs_for(master)
    assert repr(master) in str(error.value)


@pytest.mark.parametrize("overrides, fragment", [
    ({"name": " "}, "name"),
    ({"application": "/jobs/region.jar"}, "application"),
    ({"py_files": "a.zip"}, "py_files"),
    ({"py_files": ["/tmp/a,b.zip"]}, "comma"),
])
def test_bad_arguments_are_errors(overrides, fragment):
    with pytest.raises(SubmitConfigError, match=fragment):
        kwargs_for(**overrides)


def test_py_files_args_and_explicit_connection_pass_through():
    kwargs = kwargs_for(py_files=["/z/a.zip", "/z/b.zip"], application_args=["--n", 3], conn_id="spark_default")
    assert kwargs["py_files"] == "/z/a.zip,/z/b.zip"
    assert kwargs["application_args"] == ["--n", "3"]
    assert kwargs["conn_id"] == "spark_default"
    assert kwargs_for()["py_files"] is None


def test_managed_connection_is_an_env_var_json_for_the_master():
    name, value = connection_env("spark://127.0.0.1:7077")
    assert name == "AIRFLOW_CONN_" + managed_conn_id("spark://127.0.0.1:7077").upper()
    assert json.loads(value) == {"conn_type": "spark", "host": "spark://127.0.0.1:7077"}


# ---- the hook builds the expected command ------------------------------------------------------


def test_hook_built_from_the_kwargs_runs_spark_submit_on_the_sized_master():
    kwargs = kwargs_for("spark://127.0.0.1:7077", slots=2, py_files=["/z/regionflow.zip"])
    hook = RegionSubmission(APP, kwargs).make_hook()
    command = hook._build_spark_submit_command(APP)
    assert command[0] == kwargs["spark_binary"]
    assert command[command.index("--master") + 1] == "spark://127.0.0.1:7077"
    assert command[command.index("--total-executor-cores") + 1] == "2"
    assert command[command.index("--executor-memory") + 1] == "1024m"
    assert command[command.index("--py-files") + 1] == "/z/regionflow.zip"
    assert command[-3:] == [APP, "--task", "t.json"]


def _properties_file(path, mode: int = 0o600) -> str:
    from regionflow.spark.servers.auth import authenticate_properties, write_properties

    write_properties(str(path), authenticate_properties("not-a-real-secret"))
    os.chmod(path, mode)
    return str(path)


def test_a_hosts_properties_file_reaches_spark_submit_as_a_path_and_the_secret_never(tmp_path):
    """The secret of an authenticated master is in the host's 0600 properties file; the command line
    names the file only. (A real authenticated master: tests/spark/test_standalone.py.)"""
    path = _properties_file(tmp_path / "app.properties")
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    kwargs = kwargs_for("spark://127.0.0.1:7077", properties_file=path)
    command = RegionSubmission(APP, kwargs).make_hook()._build_spark_submit_command(APP)
    assert command[command.index("--properties-file") + 1] == path
    assert "not-a-real-secret" not in " ".join(command) + json.dumps(kwargs)
    assert "properties_file" not in kwargs_for("spark://127.0.0.1:7077")


@pytest.mark.parametrize("mode, fragment", [(0o640, "is open to other users (mode 0640); chmod 600 it"),
                                            (0o604, "is open to other users (mode 0604)"),
                                            (None, "cannot be read (No such file or directory)")])
def test_a_properties_file_others_may_read_or_that_is_missing_is_an_error_before_submitting(tmp_path, mode, fragment):
    from regionflow.spark.servers.auth import SecretFileError

    path = _properties_file(tmp_path / "app.properties", mode) if mode else str(tmp_path / "none.properties")
    with pytest.raises(SecretFileError, match=f"properties_file '{path}' of the host on spark://127.0.0.1:7077 "
                                              f"{re_escape(fragment)}"):
        kwargs_for("spark://127.0.0.1:7077", properties_file=path)


def test_a_connect_server_of_a_host_with_a_properties_file_loads_it(tmp_path):
    from regionflow.scheduling.hosts import Cluster
    from regionflow.spark.servers.auth import SecretFileError
    from regionflow.spark.servers.connect import ConnectServer

    path = _properties_file(tmp_path / "app.properties")
    (host,) = Cluster.parse(f"s:slots=1,master=spark://127.0.0.1:7077,properties_file={path}")
    command = ConnectServer(host, 15002, str(tmp_path / "state")).command()
    assert command[command.index("--properties-file") + 1] == path and "not-a-real-secret" not in " ".join(command)
    os.chmod(path, 0o644)
    with pytest.raises(SecretFileError, match="chmod 600"):
        ConnectServer(host, 15002, str(tmp_path / "state")).command()
    (plain,) = Cluster.parse("s:slots=1,master=spark://127.0.0.1:7077")
    assert "--properties-file" not in ConnectServer(plain, 15002, str(tmp_path / "state")).command()


def test_a_user_connection_pointing_elsewhere_is_an_error(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_RF_TEST_OTHER", json.dumps({"conn_type": "spark", "host": "local[7]"}))
    with pytest.raises(SubmitConfigError, match="rf_test_other.*local\\[7\\].*local\\[2\\]"):
        RegionSubmission(APP, kwargs_for("local[2]", conn_id="rf_test_other")).make_hook()
    with pytest.raises(SubmitConfigError, match="yarn"):
        RegionSubmission(APP, kwargs_for("local[2]", conn_id="rf_test_not_defined")).make_hook()


@pytest.mark.timeout(120)
def test_env_var_connections_resolve_without_a_database_and_inside_a_task_process(tmp_path):
    script = textwrap.dedent(
        """
        from regionflow.core.resources import UNKNOWN
        from regionflow.spark.launch.submit import RegionSubmission
        from regionflow.spark.launch.submit_args import build_submit_kwargs

        def master_of(master):
            kwargs = build_submit_kwargs(application="/a.py", application_args=[], master=master, slots=2,
                                         slot_profile=UNKNOWN, job_conf=None, py_files=[], name="n")
            return RegionSubmission("/a.py", kwargs).make_hook()._connection["master"]

        print("cli", master_of("spark://127.0.0.1:7077"))

        class NoSupervisor:  # a task process whose execution API must not be asked
            def send(self, *args, **kwargs):
                raise AssertionError("asked the execution API")

        from airflow.sdk.execution_time import task_runner
        task_runner.SUPERVISOR_COMMS = NoSupervisor()
        from airflow.sdk.execution_time.supervisor import ensure_secrets_backend_loaded
        print("task backends", [type(b).__name__ for b in ensure_secrets_backend_loaded()])
        print("task", master_of("local[*]"))
        """
    )
    env = dict(os.environ, AIRFLOW_HOME=str(tmp_path),
               AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{tmp_path}/missing/dir/airflow.db")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "cli spark://127.0.0.1:7077" in done.stdout and "task local[2]" in done.stdout
    assert "ExecutionAPISecretsBackend" in done.stdout  # the task chain, env vars first
    assert not os.path.exists(tmp_path / "missing")


# ---- build_py_files ----------------------------------------------------------------------------


def _names(path: str) -> list[str]:
    with zipfile.ZipFile(path) as archive:
        return archive.namelist()


def test_regionflow_is_zipped_without_bytecode_and_importable_from_the_zip(tmp_path):
    (zip_path,) = build_py_files(str(tmp_path / "py"), [])
    names = _names(zip_path)
    assert "regionflow/__init__.py" in names and "regionflow/spark/launch/submit.py" in names
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in names)
    probe = "import sys; sys.path.insert(0, sys.argv[1]); import regionflow.core.resources as r; print(r.__file__)"
    done = subprocess.run([sys.executable, "-S", "-c", probe, zip_path], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(zip_path)


def _user_package(root) -> None:
    package = root / "my_jobs"
    (package / "sub").mkdir(parents=True)
    (package / "__pycache__").mkdir()
    (package / "__init__.py").write_text("VALUE = 1\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "orders.py").write_text("def job():\n    return 'orders'\n")
    (package / "table.json").write_text("{}")
    (package / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (root / "my_single.py").write_text("X = 2\n")


def test_user_packages_and_modules_are_zipped_by_top_level_name(tmp_path, monkeypatch):
    _user_package(tmp_path / "src")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    paths = build_py_files(str(tmp_path / "py"),
                           ["my_jobs.sub.orders", "my_jobs", "my_single", "regionflow.core.graph"])
    assert [os.path.basename(p).split("-")[0] for p in paths] == ["regionflow", "my_jobs", "my_single"]
    assert sorted(_names(paths[1])) == ["my_jobs/__init__.py", "my_jobs/sub/__init__.py", "my_jobs/sub/orders.py",
                                        "my_jobs/table.json"]
    assert _names(paths[2]) == ["my_single.py"]


def test_zips_are_cached_by_content(tmp_path, monkeypatch):
    _user_package(tmp_path / "src")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    first = build_py_files(str(tmp_path / "py"), ["my_jobs"])
    stamp = os.stat(first[1]).st_mtime_ns
    assert build_py_files(str(tmp_path / "py"), ["my_jobs"]) == first
    assert os.stat(first[1]).st_mtime_ns == stamp
    (tmp_path / "src" / "my_jobs" / "__init__.py").write_text("VALUE = 2\n")
    changed = build_py_files(str(tmp_path / "py"), ["my_jobs"])
    assert changed[0] == first[0] and changed[1] != first[1]


@pytest.mark.parametrize("module, fragment", [
    ("surely_not_a_module_xyz", "cannot be imported"),
    ("regionflow.no_such_module", "does not exist"),
    ("1bad-name", "not an import name"),
    ("sys", "not Python source"),
])
def test_modules_that_cannot_travel_are_errors(tmp_path, module, fragment):
    with pytest.raises(SubmitConfigError, match=fragment):
        build_py_files(str(tmp_path), [module])


# ---- tracebacks and cpu pinning ---------------------------------------------------------------


def test_python_traceback_is_cut_out_of_the_driver_output():
    lines = ["26/11/22 03:24:06 INFO SparkContext: Running Spark version 4.2.0",
             "Traceback (most recent call last):", 'File "/jobs/region.py", line 3, in <module>',
             "ValueError: vertex map#3 failed",
             "26/11/22 03:24:09 INFO ShutdownHookManager: Shutdown hook called"]
    assert extract_python_traceback(lines) == "\n".join(lines[1:4])
    assert extract_python_traceback(lines[:1]) is None


def _child_cpus_allowed(cores) -> str:
    with pinned_cpus(cores):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(10)"])
    try:
        with open(f"/proc/{child.pid}/status", encoding="utf-8") as status:
            return next(line.split()[1] for line in status if line.startswith("Cpus_allowed_list"))
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux cpu affinity")
def test_pinning_the_submitting_thread_pins_the_child_and_is_undone_after():
    core = max(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    assert _child_cpus_allowed((core,)) == str(core)
    assert os.sched_getaffinity(0) == before


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux cpu affinity")
def test_pinning_in_a_worker_thread_leaves_other_threads_alone():
    core = max(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    seen = {}

    def worker():
        with pinned_cpus((core,)):
            seen["inside"] = os.sched_getaffinity(0)
            seen["main"] = os.sched_getaffinity(threading.main_thread().native_id)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == {"inside": {core}, "main": before}


def test_pinning_to_cores_this_process_may_not_use_is_an_error():
    with pytest.raises(SubmitConfigError, match="9999"):
        with pinned_cpus((9999,)):
            pass


# ---- RegionSubmission with a fake spark-submit (the real hook, no JVM) --------------------------


def fake_submission(tmp_path, fake_spark_submit, body: str, **options) -> RegionSubmission:
    app = tmp_path / f"app_{abs(hash(body))}.py"
    app.write_text(textwrap.dedent(body))
    kwargs = build_submit_kwargs(application=str(app), application_args=["arg1"], master="local[*]", slots=1,
                                 slot_profile=ONE_CORE_SLOT, job_conf=None, py_files=[], name="fake region")
    kwargs["spark_binary"] = fake_spark_submit
    return RegionSubmission(str(app), kwargs, **options)


def test_a_successful_submission_reports_output_time_and_command(tmp_path, fake_spark_submit):
    lines = []
    submission = fake_submission(tmp_path, fake_spark_submit, """
        import sys
        print("driver says", sys.argv[1:], flush=True)
        """, on_line=lines.append)
    result = submission.run()
    assert result.ok and result.returncode == 0 and not result.killed
    assert "fake-spark-submit master=local[1]" in result.log_tail
    assert "driver says ['arg1']" in result.log_tail and lines == list(result.log_tail)
    assert "--master local[1]" in result.command and "--conf spark.ui.enabled=false" in result.command
    assert 0 < result.first_line_seconds <= result.seconds


def test_a_failing_driver_returns_its_traceback_and_can_raise(tmp_path, fake_spark_submit):
    body = """
        def vertex_map():
            raise ValueError("vertex map#3 cannot parse row 17")
        vertex_map()
        """
    result = fake_submission(tmp_path, fake_spark_submit, body).run()
    assert not result.ok and result.returncode == 1 and not result.killed
    assert result.traceback.startswith("Traceback (most recent call last):")
    assert result.traceback.endswith("ValueError: vertex map#3 cannot parse row 17")
    assert "vertex map#3 cannot parse row 17" in result.describe()
    with pytest.raises(SubmissionFailed, match="row 17") as error:
        fake_submission(tmp_path, fake_spark_submit, body, raise_on_failure=True).run()
    assert error.value.result.returncode == 1


def test_the_log_tail_keeps_the_last_lines(tmp_path, fake_spark_submit):
    result = fake_submission(tmp_path, fake_spark_submit, """
        for i in range(50):
            print("line", i)
        """, tail_lines=5).run()
    assert result.log_tail == tuple(f"line {i}" for i in range(45, 50))


def test_concurrent_submissions_keep_their_output_apart(tmp_path, fake_spark_submit):
    submissions = [fake_submission(tmp_path, fake_spark_submit, f"""
        import time
        for i in range(20):
            print("from {name}", i, flush=True)
            time.sleep(0.005)
        """) for name in ("alpha", "beta")]
    threads = [threading.Thread(target=s.run) for s in submissions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    alpha, beta = (s.result.log_tail for s in submissions)
    assert sum("from alpha" in line for line in alpha) == 20 and not any("beta" in line for line in alpha)
    assert sum("from beta" in line for line in beta) == 20 and not any("alpha" in line for line in beta)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux cpu affinity")
def test_cpu_affinity_reaches_the_driver_process(tmp_path, fake_spark_submit):
    core = max(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    result = fake_submission(tmp_path, fake_spark_submit, """
        import os
        status = open("/proc/self/status").read().splitlines()
        print("allowed", [l.split()[1] for l in status if l.startswith("Cpus_allowed_list")][0])
        """, cpu_affinity=(core,)).run()
    assert result.ok and f"allowed {core}" in result.log_tail
    assert os.sched_getaffinity(0) == before


def test_a_missing_spark_submit_is_a_failed_result_not_an_exception(tmp_path, fake_spark_submit):
    submission = fake_submission(tmp_path, fake_spark_submit, "print('never')\n")
    submission.hook_kwargs["spark_binary"] = str(tmp_path / "no-spark-submit")
    result = submission.run()
    assert not result.ok and result.returncode is None and "no-spark-submit" in result.error


def line_watch(marker: str):
    """An event set once an output line contains `marker`, and the on_line callback setting it."""
    seen = threading.Event()
    return seen, lambda line: seen.set() if marker in line else None


def _pids_matching(pattern: str) -> list[int]:
    done = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return [int(pid) for pid in done.stdout.split()]


@pytest.mark.timeout(60)
def test_kill_ends_the_whole_process_group_even_when_sigterm_is_ignored(tmp_path, fake_spark_submit):
    marker = f"rf-grandchild-{os.getpid()}-{time.monotonic_ns()}"
    ready, watch = line_watch("ready")
    submission = fake_submission(tmp_path, fake_spark_submit, f"""
        import signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "{marker}"])
        print("ready", flush=True)
        time.sleep(300)
        """, kill_grace_seconds=0.5, on_line=watch)
    runner = threading.Thread(target=submission.run)
    runner.start()
    assert ready.wait(30)
    pgid = submission.pid
    started = time.monotonic()
    submission.kill()
    runner.join(30)
    assert submission.result.killed and not submission.result.ok
    assert time.monotonic() - started < 10
    assert process_group_members(pgid) == [] and _pids_matching(marker) == []


def test_kill_before_run_submits_nothing(tmp_path, fake_spark_submit):
    submission = fake_submission(tmp_path, fake_spark_submit, "print('never')\n")
    submission.kill()
    result = submission.run()
    assert result.killed and result.returncode is None and result.log_tail == ()
    with pytest.raises(SubmitConfigError, match="already run"):
        submission.run()


# ---- real spark-submit (two submissions) ------------------------------------------------------


def real_submission(tiny_app, out, mode, *, slots=1, **options) -> RegionSubmission:
    kwargs = build_submit_kwargs(application=tiny_app, application_args=[str(out), mode], master="local[*]",
                                 slots=slots, slot_profile=ONE_CORE_SLOT,
                                 job_conf={"spark.sql.shuffle.partitions": "2"},
                                 py_files=[], name=f"test {mode}")
    return RegionSubmission(tiny_app, kwargs, **options)


@pytest.mark.timeout(240)
def test_real_local_submission_runs_the_app_pinned_to_a_core(tiny_app, tmp_path):
    core = max(os.sched_getaffinity(0))
    out = tmp_path / "out.json"
    result = real_submission(tiny_app, out, "count", cpu_affinity=(core,)).run()
    assert result.ok, result.describe()
    written = json.loads(out.read_text())
    assert written == {"count": 1000, "master": "local[1]", "affinity": [core]}
    assert "tiny-app: counted 1000" in result.log_tail


@pytest.mark.timeout(240)
def test_real_local_submission_killed_mid_run_leaves_no_process(tiny_app, tmp_path):
    out = tmp_path / "never.json"
    started, watch = line_watch("tiny-app: session started")
    submission = real_submission(tiny_app, out, "sleep", on_line=watch)
    runner = threading.Thread(target=submission.run)
    runner.start()
    assert started.wait(180), "the app never started its session"
    pgid = submission.pid
    submission.kill()
    runner.join(60)
    assert submission.result.killed and not submission.result.ok
    assert process_group_members(pgid) == []
    assert _pids_matching(str(out)) == []
    assert not out.exists()


def test_a_spark_submit_killed_by_a_signal_is_described_as_killed_by_it():
    """Popen reports a process ended by signal N as -N: a kill -9 of the driver's JVM must read as such,
    in the attempt's recorded failure and in the task's error, not as a bare exit code."""
    from regionflow.spark.launch.attempt import result_reason
    from regionflow.spark.launch.submit import SubmissionResult

    killed = SubmissionResult(-9, 6.2, ("WARN NativeCodeLoader: no native-hadoop",), killed=False)
    exited = SubmissionResult(1, 6.2, ("boom",), killed=False)
    assert killed.describe().startswith("spark-submit (the Spark driver) was killed by signal 9 (SIGKILL) after 6.2 s")
    assert result_reason(killed) == ("spark-submit (the Spark driver) was killed by signal 9 (SIGKILL): "
                                     "WARN NativeCodeLoader: no native-hadoop")
    assert result_reason(exited) == "spark-submit exited with 1: boom"
    assert SubmissionResult(-99, 1.0, (), killed=False).exit_text.endswith("killed by signal 99")


@pytest.mark.timeout(60)
def test_an_orphaned_submission_is_found_by_its_attempt_id_alone_and_ended(tmp_path, fake_spark_submit):
    """The task process that started spark-submit was killed (-9): spark-submit, in a process group of its
    own, lives on. Every process it starts carries REGIONFLOW_ATTEMPT_ID, so the executor's stopper ends
    that attempt's groups from the attempt id alone, and leaves another attempt's alone."""
    from regionflow.scheduling.hosts import Host
    from regionflow.spark.data.task import UnitTask
    from regionflow.spark.launch.orphans import ATTEMPT_VARIABLE, ProcessOrphans
    from regionflow.spark.launch.submission import unit_submission

    task = UnitTask(job="m:job", mode="all-pipelined", run_id="r", data_dir=str(tmp_path), unit_key="u",
                    unit_name="u", regions=[0], attempt_id="try1-abc")
    made = unit_submission(task, str(tmp_path / "u.json"), Host.of("h", 1, master="local[1]"), 1, {}, [])
    assert made.hook_kwargs["env_vars"][ATTEMPT_VARIABLE] == "try1-abc"  # what tags a real attempt's processes

    def tagged(attempt_id: str):
        marker = f"rf-orphan-{attempt_id}-{os.getpid()}-{time.monotonic_ns()}"
        ready, watch = line_watch("ready")
        submission = fake_submission(tmp_path, fake_spark_submit, f"""
            import subprocess, sys, time
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "{marker}"])
            print("ready", flush=True)
            time.sleep(300)
            """, on_line=watch)
        submission.hook_kwargs["env_vars"][ATTEMPT_VARIABLE] = attempt_id
        runner = threading.Thread(target=submission.run, daemon=True)
        runner.start()
        assert ready.wait(30)
        return submission, runner, marker

    orphan, orphan_runner, orphan_marker = tagged("try1-orphan")
    other, other_runner, other_marker = tagged("try1-other")
    try:
        pgid = orphan.pid
        assert ProcessOrphans().stop("try1-orphan", "h") == f"1 process group(s) of its spark-submit ended ({pgid})"
        orphan_runner.join(30)
        assert process_group_members(pgid) == [] and _pids_matching(orphan_marker) == []
        assert process_group_members(other.pid) != [] and _pids_matching(other_marker) != []
        assert ProcessOrphans().stop("try1-orphan", "h") == "no process of it was left on this machine"
    finally:
        other.kill()
        other_runner.join(30)
    assert _pids_matching(other_marker) == []
