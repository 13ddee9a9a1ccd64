"""Device profiles: one JSON file per device under profiles/, every number with its source.

A profile is data, not code: each leaf is {"value": number, "source": "where it comes from"}
(a vendor datasheet or paper, "measured on the lent H200 machine by benchmarks/...", or
"assumed: why").  load() checks that every field the model reads is there, positive, and
cited, and returns a Profile whose attributes are plain floats.
"""
from __future__ import annotations

import json
import os

from triton_dist.errors import TritonDistError

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "profiles")

# Every field the model reads: dotted path in the JSON -> attribute of Profile.
FIELDS = {
    "cores.cube": "cube_cores", "cores.vector": "vector_cores",
    "dot_efficiency": "dot_efficiency",
    "hbm.bandwidth_Bps": "hbm_bw", "hbm.core_bandwidth_Bps": "hbm_core_bw", "hbm.latency_s": "hbm_lat",
    "l2.bandwidth_Bps": "l2_bw", "l2.core_bandwidth_Bps": "l2_core_bw",
    "link.bandwidth_Bps": "link_bw", "link.core_store_bandwidth_Bps": "link_core_store_bw",
    "link.core_put_bandwidth_Bps": "link_core_put_bw", "link.latency_s": "link_lat",
    "signal.latency_s": "signal_lat", "signal.local_latency_s": "signal_local_lat", "signal.poll_s": "poll",
    "atomic.local_latency_s": "atomic_local_lat", "atomic.remote_latency_s": "atomic_remote_lat",
    "launch.device_s": "launch_device", "launch.host_per_call_s": "launch_host",
    "pipeline_stages": "stages",
}
DTYPES = ("bf16", "fp16", "tf32", "fp32")


class Profile:
    """A loaded device profile: floats by attribute (FIELDS), cube_flops by dtype, the sources."""

    def __init__(self, name: str, doc: dict, path: str):
        self.name, self.path = name, path
        self.description = doc.get("description", "")
        self.sources = {}
        for dotted, attr in FIELDS.items():
            setattr(self, attr, _number(name, doc, dotted, self.sources))
        self.cube_flops = {d: _number(name, doc, f"cube_flops.{d}", self.sources) for d in DTYPES}
        self.cube_cores, self.vector_cores = int(self.cube_cores), int(self.vector_cores)
        self.stages = max(1, int(self.stages))

    def cores(self, mix: bool) -> int:
        """Programs that run at once: AI (cube) cores for a kernel with tl.dot, else vector cores."""
        return self.cube_cores if mix else self.vector_cores

    def dot_rate(self, dtype: str, mix_cores: int) -> float:
        """FLOP/s of one core's tl.dot of `dtype` (the device's rate shared by its cube cores)."""
        peak = self.cube_flops.get(dtype, self.cube_flops["fp32"])
        return peak * self.dot_efficiency / mix_cores


def known() -> list:
    return sorted(f[:-5] for f in os.listdir(HERE) if f.endswith(".json"))


def load(name_or_path) -> Profile:
    """A profile by name (profiles/<name>.json) or by path to a JSON file; a Profile passes through."""
    if isinstance(name_or_path, Profile):
        return name_or_path
    if not isinstance(name_or_path, str) or not name_or_path:
        raise TritonDistError(f"predict: the device must be a profile name, got {name_or_path!r}; "
                              f"known devices: {', '.join(known())}")
    path = name_or_path if name_or_path.endswith(".json") else os.path.join(HERE, name_or_path + ".json")
    if not os.path.isfile(path):
        raise TritonDistError(f"predict: unknown device {name_or_path!r}; known devices: {', '.join(known())} "
                              f"(or the path of a profile JSON file)")
    try:
        with open(path) as f:
            doc = json.load(f)
    except ValueError as e:
        raise TritonDistError(f"predict: the profile {path} is not valid JSON: {e}") from None
    return Profile(doc.get("name", os.path.basename(path)[:-5]), doc, path)


def _number(name: str, doc: dict, dotted: str, sources: dict) -> float:
    node = doc
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise TritonDistError(f"predict: profile {name!r} lacks {dotted} (every profile gives each of: "
                                  f"{', '.join(FIELDS)}, cube_flops.{{{','.join(DTYPES)}}})")
        node = node[part]
    if not isinstance(node, dict) or "value" not in node or not str(node.get("source", "")).strip():
        raise TritonDistError(f"predict: profile {name!r}: {dotted} must be {{\"value\": number, \"source\": "
                              f"\"where it comes from\"}}, got {node!r}")
    v = node["value"]
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
        raise TritonDistError(f"predict: profile {name!r}: {dotted} must be a positive number, got {v!r}")
    sources[dotted] = node["source"]
    return float(v)
