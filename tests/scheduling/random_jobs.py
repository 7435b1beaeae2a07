"""Random jobs for the simulation's property tests (test_simulate.py, test_simulate_reference.py): a
hypothesis strategy of one to three small job graphs and an exchange mode, as plans."""
from hypothesis import strategies as st

from regionflow.core.graph import JobGraph
from regionflow.core.plan import Plan


@st.composite
def random_jobs(draw):
    count = draw(st.integers(1, 3))
    jobs = []
    for j in range(count):
        graph = JobGraph(f"j{j}")
        vertices = draw(st.integers(1, 4))
        parallelism = [draw(st.integers(1, 3)) for _ in range(vertices)]
        for v, p in enumerate(parallelism):
            graph.add_vertex(f"v{v}", p)
        for dst in range(1, vertices):
            src = draw(st.integers(0, dst - 1))
            distribution = draw(st.sampled_from(["rescale", "hash", "broadcast"]
                                                + (["forward"] if parallelism[src] == parallelism[dst] else [])))
            graph.connect(f"v{src}", f"v{dst}", distribution, draw(st.sampled_from([None, "pipelined", "blocking"])),
                          keys=["k"] if distribution == "hash" else [])
        jobs.append(graph)
    mode = draw(st.sampled_from(["all-blocking", "forward-pipelined-only", "pointwise-pipelined-only",
                                 "all-pipelined"]))
    return [Plan(graph, mode) for graph in jobs]
