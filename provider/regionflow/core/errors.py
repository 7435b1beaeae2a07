"""Error types of regionflow's core layer.

Every error names the thing at fault (vertex, edge, region, option, value) and says what would fix
it, so the CLI and Airflow's import-error view can show it as is, without a traceback.
"""


class RegionflowError(Exception):
    """Base of every error regionflow raises on purpose."""


class JobGraphError(RegionflowError, ValueError):
    """The job graph is invalid (cycle, unknown vertex, bad parallelism, ...)."""


class SpecError(RegionflowError, ValueError):
    """A job spec file, an option or a value given on the command line is malformed."""


class ResourceError(RegionflowError, ValueError):
    """Resource declarations are invalid or inconsistent."""
