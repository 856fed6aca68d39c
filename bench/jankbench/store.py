"""Stored results: bench/results/<scenario>.json, one per scenario, each
{"scenario", "provenance", and either "data" (what the scenario returned)
or "markdown" (a section measured by hand, kept as text until a run
replaces it: text only, its goals are "not measured")}. The provenance
says when, how and on which build (builds.py) it was measured.

Quick runs (BENCH_QUICK=1) are smoke runs: they are stored under
build/bench/results-quick/ and laid over the committed results when
rendered, so they never replace a full run's figures in the tree."""
from __future__ import annotations

import glob
import json
import math
import os


def provenance(date: str, tree_: dict, build: dict, machine: dict, quick: bool, command: str,
               load: tuple[str, str], seconds: float) -> dict:
    return {"date": date, **tree_, "build": build, "quick": quick, "command": command, "machine": machine,
            "load": list(load), "seconds": round(seconds, 1)}


def _clean(x):
    """NaN is not JSON: stored as null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def save(directory: str, name: str, data: dict, prov: dict) -> str:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{name}.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(_clean({"scenario": name, "provenance": prov, "data": data}), f,
                  indent=1, ensure_ascii=False, allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)
    return path


def load_dir(directory: str) -> dict[str, dict]:
    out = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        with open(path) as f:
            entry = json.load(f)
        out[entry.get("scenario") or os.path.basename(path)[:-5]] = entry
    return out


def load(*directories: str) -> dict[str, dict]:
    """Every stored result; a later directory's entry replaces an earlier's."""
    out = {}
    for d in directories:
        if d and os.path.isdir(d):
            out.update(load_dir(d))
    return out
