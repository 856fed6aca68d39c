"""One function per measurement: fn(ctx) -> plain JSON-serialisable data.
They render nothing (sections*.py do) and judge nothing (goals.py does).

SCENARIOS is in run order: the order of the bench before it was a package,
with the fuzzers and the soak (hours, and 30 minutes) last."""
from __future__ import annotations

from .causes import causes
from .curve import curve
from .detect import accuracy, footprint
from .frames import frames
from .fuzz import fuzz
from .lane import lane_causes, lane_idle, lane_tax
from .load import Workloads, hooks, tax, throughput
from .soak import soak
from .java import hotspot_reader, jvm
from .stacks import node, python_reader, stacks, v8_reader
from .where import where
from .startup import startup

SCENARIOS = {
    "startup": startup,
    "accuracy": accuracy,
    "throughput": throughput,
    "where": where,
    "tax": tax,
    "hooks": hooks,
    "footprint": footprint,
    "stacks": stacks,
    "python": python_reader,
    "v8": v8_reader,
    "node": node,
    "hotspot": hotspot_reader,
    "jvm": jvm,
    "lane_tax": lane_tax,
    "lane_idle": lane_idle,
    "frames": frames,
    "causes": causes,
    "lane_causes": lane_causes,
    "curve": curve,
    "fuzz": fuzz,
    "soak": soak,
}


class Context:
    """What scenarios share within one run: BCC's environment, and the
    workload servers (started on first use, stopped by close())."""

    def __init__(self, bcc_env: dict):
        self.bcc_env = bcc_env
        self._workloads = None

    def workloads(self) -> Workloads:
        if self._workloads is None:
            self._workloads = Workloads()
        return self._workloads

    def close(self) -> None:
        if self._workloads is not None:
            self._workloads.close()
