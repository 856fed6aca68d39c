"""Section 6b: the syscall tax on Debian 12's own 6.1 x86_64 kernel (booted
under qemu by the kernel lane): ns per getppid() in a process jankbpf never
watches, without jankbpf, with its waits hooked by syscall tracepoints, and
by BPF trampolines; each the best of 5 loops of 200,000 calls, A B A B A B
A per hook kind in one boot (about 3 minutes): each round's B against the
A on either side, the median round the figure. Emulated (TCG) nanoseconds are not
native ones: the ratios are the figure."""
from __future__ import annotations

import os
import re
import sys

from .. import config
from ..procs import NotMeasured, say

KINDS = {"tracepoint": "tp", "trampoline": "tramp"}


def _best(text: str) -> float | None:
    xs = [float(m) for m in re.findall(r"ns_per_call ([0-9.]+)", text or "")]
    return min(xs) if xs else None


def lane_tax(ctx) -> dict:
    say("6b. syscall tax on Debian 12's 6.1 x86_64 kernel (kernel lane)")
    sys.path.insert(0, os.path.join(config.ROOT, "scripts", "kernel-lane"))
    try:
        import lane
        scenarios = [(f"tax-{k}", "tax", f"timer+{opt}") for k, opt in KINDS.items()]
        boot = lane.boot("x86", scenarios=scenarios, out_dir=os.path.join(lane.LANE_DIR, "x86-tax"))
    except Exception as e:  # noqa: BLE001 - the lane is reported, not fatal
        raise NotMeasured(f"the kernel lane did not boot: {e}") from e
    secs = boot.sections
    res = {"kernel": boot.kernel_pkg, "health": boot.health() or "ok", "kinds": {},
           "calls": 200000, "reps": 5, "commands": ["python3 -m jankbench --only lane_tax   # boots the lane"]}
    for kind in KINDS:
        name = f"tax-{kind}"
        get = lambda item: secs.get(f"{name}/{item}", ("", None))[0]  # noqa: E731
        summary = next((l for l in get("records").splitlines() if '"type":"summary"' in l), "")
        hooks = re.search(r'"hooks":"(\w+)"', summary)
        a = [_best(get(f"target-a{i}")) for i in range(1, 5)]
        b = [_best(get(f"target-b{i}")) for i in range(1, 4)]
        rounds = [{"before": a[i], "during": b[i], "after": a[i + 1]} for i in range(3) if b[i]]
        mid = sorted(rounds, key=lambda r: r["during"] / ((r["before"] + r["after"]) / 2)
                     if r["before"] and r["after"] else 0)[len(rounds) // 2] if rounds else {}
        res["kinds"][kind] = {
            "before": mid.get("before"), "during": mid.get("during"), "after": mid.get("after"),
            "rounds": rounds,
            "hooks_used": hooks.group(1) if hooks else None,
        }
    return res

