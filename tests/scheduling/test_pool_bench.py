from rfbench.pool import bench_pool


def test_bench_pool_runs_every_bulk_through_and_reports_its_figures():
    result = bench_pool(bulks=300, slots=100, hosts=10, baseline_bulks=100)
    # 10 gpu slots here: gpu bulks of more than 10 slots are rejected, the rest all complete
    assert result["completed"] + result["rejected"] == 300 and result["completed"] > 250
    assert result["decisions"] == 2 * result["completed"]
    for key in ("decisions_per_s", "median_decision_us", "p99_decision_us", "wall_s", "speedup",
                "baseline_decisions_per_s"):
        assert result[key] > 0
