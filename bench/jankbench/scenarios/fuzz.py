"""The fuzzing section: every libFuzzer target (build/fuzz/, make fuzz-bin)
for FUZZ_BENCH_RUNS executions through scripts/fuzz.sh bench, whose
markdown table is parsed into rows (its format is fuzz.sh's own)."""
from __future__ import annotations

import os
import subprocess
import tempfile

from .. import config
from ..procs import say


def parse_table(text: str) -> list[dict]:
    """fuzz.sh's rows: | target | executions | exec/s | crashes | corpus |"""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or cells[0] in ("target", "") or set(cells[1]) <= set("-:"):
            continue
        rows.append({"target": cells[0], "executions": int(cells[1] or 0),
                     "exec_per_s": int(float(cells[2] or 0)), "crashes": int(cells[3] or 0),
                     "corpus": cells[4]})
    return rows


def fuzz(ctx) -> dict:
    runs = config.FUZZ_RUNS
    say(f"fuzzing: every target, {runs:,} executions each")
    with tempfile.TemporaryDirectory(prefix="jankbpf-fuzz-") as tmp:
        table = os.path.join(tmp, "fuzz.md")
        env = {**os.environ, "FUZZ_BENCH_RUNS": str(runs), "FUZZ_TABLE": table}
        rc = subprocess.run([os.path.join(config.ROOT, "scripts", "fuzz.sh"), "bench"],
                            cwd=config.ROOT, env=env, stdout=subprocess.DEVNULL).returncode
        text = open(table).read() if os.path.exists(table) else ""
    try:
        clang = subprocess.run(["clang++", "-dumpversion"], capture_output=True, text=True).stdout.strip()
    except OSError:
        clang = "?"
    return {"runs": runs, "rc": rc, "clang": clang, "cpus": os.cpu_count(), "rows": parse_table(text),
            "commands": [f"FUZZ_BENCH_RUNS={runs} scripts/fuzz.sh bench"]}
