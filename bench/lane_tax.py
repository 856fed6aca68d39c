"""The syscall tax on Debian 12's own 6.1 x86_64 kernel (booted under qemu
by the kernel lane): ns per getppid() in a process jankbpf never watches,
without jankbpf, with its waits hooked by syscall tracepoints, and by BPF
trampolines; each the best of 5 loops of 200,000 calls, A B A per hook kind
in one boot. Emulated (TCG) nanoseconds are not native ones: the ratios are
the figure.

  measure() -> dict       boots the lane once (about 2 minutes)
  render(res) -> str      the RESULTS.md section
"""
from __future__ import annotations

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts", "kernel-lane"))
import lane  # noqa: E402

KINDS = {"tracepoint": "tp", "trampoline": "tramp"}


def _best(text: str) -> float | None:
    xs = [float(m) for m in re.findall(r"ns_per_call ([0-9.]+)", text or "")]
    return min(xs) if xs else None


def measure() -> dict:
    scenarios = [(f"tax-{k}", "tax", f"timer+{opt}") for k, opt in KINDS.items()]
    boot = lane.boot("x86", scenarios=scenarios, out_dir=os.path.join(lane.LANE_DIR, "x86-tax"))
    secs = boot.sections
    res = {"kernel": boot.kernel_pkg, "health": boot.health() or "ok", "kinds": {}}
    for kind in KINDS:
        name = f"tax-{kind}"
        get = lambda item: secs.get(f"{name}/{item}", ("", None))[0]
        summary = next((l for l in get("records").splitlines() if '"type":"summary"' in l), "")
        hooks = re.search(r'"hooks":"(\w+)"', summary)
        res["kinds"][kind] = {
            "before": _best(get("target-before")),
            "during": _best(get("target-during")),
            "after": _best(get("target-after")),
            "hooks_used": hooks.group(1) if hooks else None,
        }
    return res


def render(res: dict) -> str:
    out = ["## 6b. Syscall tax on Debian 12's 6.1 x86_64 kernel (kernel lane, qemu TCG)", "",
           f"Kernel `{res.get('kernel')}`, guest health: {res.get('health')}. "
           "ns per getppid() of a process that never waits; best of 5 × 200,000 calls; "
           "jankbpf attached system-wide with the timer watchdog.", "",
           "| waits hooked by | without | with jankbpf | after | ratio (with / mean without) | hooks the summary reports |",
           "| --- | --- | --- | --- | --- | --- |"]
    for kind, r in res.get("kinds", {}).items():
        base = [x for x in (r["before"], r["after"]) if x]
        ratio = r["during"] / (sum(base) / len(base)) if base and r["during"] else None
        f = lambda x: f"{x:.0f}" if x else "n/a"
        out.append(f"| {kind} | {f(r['before'])} | {f(r['during'])} | {f(r['after'])} | "
                   f"{ratio:.3f}× |" if ratio else f"| {kind} | {f(r['before'])} | {f(r['during'])} | "
                   f"{f(r['after'])} | n/a |")
        out[-1] += f" {r['hooks_used'] or 'n/a'} |"
    out.append("")
    out.append("Goal (issue 12): trampolines ≤ 1.05× on this lane; the tracepoint fallback beside it.")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    r = measure()
    print(render(r))
