"""The small-job builder the core tests share."""
from regionflow.core.graph import JobGraph
from regionflow.core.resources import UNKNOWN


def make_job(vertices, edges=(), name="job"):
    """vertices: name -> parallelism, or (parallelism, resources, slot_sharing_group);
    edges: (src, dst, distribution[, exchange[, keys]]); HASH gets key "k" unless keys are given."""
    graph = JobGraph(name)
    for vertex, spec in vertices.items():
        parallelism, resources, group = spec if isinstance(spec, tuple) else (spec, UNKNOWN, None)
        graph.add_vertex(vertex, parallelism, resources, group)
    for src, dst, distribution, *rest in edges:
        exchange = rest[0] if rest else None
        keys = rest[1] if len(rest) > 1 else (("k",) if str(distribution).lower() == "hash" else ())
        graph.connect(src, dst, distribution, exchange, keys)
    return graph
