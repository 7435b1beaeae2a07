"""The declared model of a host in its JSON form (``[regionflow] hosts`` as JSON, `Host.from_dict`),
also printed by ``regionflow schema hosts``. The compact text form (``a:slots=2,cpu=2``) names the same
fields; `hosts` turns both into one flat field map, whose amounts (sizes such as ``4g``) it reads."""
from __future__ import annotations

from ..core.schema import Field, Model

MAX_SLOTS_PER_HOST = 32768  # as many as the largest vertex parallelism; a typo must not build a huge pool
MAX_CORE_ID = 8192  # Linux's largest CONFIG_NR_CPUS default; a typo like 0-100000000 must not list 10^8 cores

_SIZE = ("number", "string")
_SIZE_DOC = "MiB as a number, or a size such as '4g', '512m'"

SLOT = Model("slot", "per-slot overrides of the host's evenly divided resources", (
    Field("cpu", ("number", "string"), "cores per slot", minimum=0),
    Field("mem", _SIZE, f"heap per slot, {_SIZE_DOC}", minimum=0),
    Field("heap", _SIZE, f"heap per slot (alias of mem), {_SIZE_DOC}", minimum=0),
    Field("off_heap", _SIZE, f"off-heap memory per slot, {_SIZE_DOC}", minimum=0),
    Field("managed", _SIZE, f"managed memory per slot, {_SIZE_DOC}", minimum=0),
    Field("gpu", ("number", "string"), "GPUs per slot", minimum=0),
    Field("ext", "object", "extended resources per slot, e.g. {\"fpga\": 1}", values="number", minimum=0),
))

HOST = Model("host", "a place that runs Spark and offers slots to the pool", (
    Field("name", "string", "the host's unique name", required=True, non_empty=True),
    Field("slots", ("integer", "string"), f"its slot count, 1 to {MAX_SLOTS_PER_HOST}", required=True,
          minimum=1, maximum=MAX_SLOTS_PER_HOST),
    Field("cpu", ("number", "string"), "cores of the whole host (default: one per slot)", minimum=0),
    Field("mem", _SIZE, f"heap of the whole host, {_SIZE_DOC} (default 1g per slot)", minimum=0),
    Field("heap", _SIZE, f"heap of the whole host (alias of mem), {_SIZE_DOC}", minimum=0),
    Field("off_heap", _SIZE, f"off-heap memory of the whole host, {_SIZE_DOC}", minimum=0),
    Field("managed", _SIZE, f"managed memory of the whole host, {_SIZE_DOC}", minimum=0),
    Field("gpu", ("number", "string"), "GPUs of the whole host", minimum=0),
    Field("ext", "object", "extended resources of the whole host, e.g. {\"fpga\": 2}", values="number", minimum=0),
    Field("slot", SLOT, "per-slot overrides"),
    Field("master", "string", "local, local[k], local[*] or spark://host:port (default local[cores])",
          non_empty=True),
    Field("affinity", ("array", "string"), f"core ids to pin a local host to (0 to {MAX_CORE_ID - 1}), a list or "
          "'0-3+8'", items="integer", minimum=0, maximum=MAX_CORE_ID - 1),
))

__all__ = ["HOST", "MAX_CORE_ID", "MAX_SLOTS_PER_HOST", "SLOT"]
