"""The declared model of a host in its JSON form (``[regionflow] hosts`` as JSON, `Host.from_dict`),
also printed by ``regionflow schema hosts``. The compact text form (``a:slots=2,cpu=2``) names the same
fields; `hosts` turns both into one flat field map, whose amounts (sizes such as ``4g``) it reads."""
from __future__ import annotations

from ..core.schema import Field, Model

MAX_SLOTS_PER_HOST = 32768  # as many as the largest vertex parallelism; a typo must not build a huge pool
MAX_CORE_ID = 8192  # Linux's largest CONFIG_NR_CPUS default; a typo like 0-100000000 must not list 10^8 cores

_SIZE = ("number", "string")
_SIZE_DOC = "MiB as a number, or a size such as '4g', '512m'"


def _resources(scope: str) -> tuple[Field, ...]:
    """The resource fields, ``scope`` being "per slot" or "of the whole host"."""
    return (
        Field("cpu", ("number", "string"), f"cores {scope}", minimum=0),
        Field("mem", _SIZE, f"heap {scope}, {_SIZE_DOC}", minimum=0),
        Field("heap", _SIZE, f"heap {scope} (alias of mem), {_SIZE_DOC}", minimum=0),
        Field("off_heap", _SIZE, f"off-heap memory {scope}, {_SIZE_DOC}", minimum=0),
        Field("managed", _SIZE, f"managed memory {scope}, {_SIZE_DOC}", minimum=0),
        Field("gpu", ("number", "string"), f"GPUs {scope}", minimum=0),
        Field("ext", "object", f"extended resources {scope}, e.g. {{\"fpga\": 1}}", values="number", minimum=0),
    )


SLOT = Model("slot", "per-slot overrides of the host's evenly divided resources", _resources("per slot"))

HOST = Model("host", "a place that runs Spark and offers slots to the pool (a resource not given defaults to "
             "one cpu and 1g heap per slot, none of the others)", (
    Field("name", "string", "the host's unique name", required=True, non_empty=True),
    Field("slots", ("integer", "string"), f"its slot count, 1 to {MAX_SLOTS_PER_HOST}", required=True,
          minimum=1, maximum=MAX_SLOTS_PER_HOST),
    *_resources("of the whole host"),
    Field("slot", SLOT, "per-slot overrides"),
    Field("master", "string", "local, local[k], local[*] or spark://host:port (default local[cores])",
          non_empty=True),
    Field("affinity", ("array", "string"), f"core ids to pin a local host to (0 to {MAX_CORE_ID - 1}), a list or "
          "'0-3+8'", items="integer", minimum=0, maximum=MAX_CORE_ID - 1),
))

__all__ = ["HOST", "MAX_CORE_ID", "MAX_SLOTS_PER_HOST", "SLOT"]
