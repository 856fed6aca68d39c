"""Section 7: stacks. jankbpf end to end on a frame-pointer-less target
beside bpftrace's ustack, the stack library alone, the warm cost per
sample; the Python frame reader; node (a large binary, cold then warm)."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess

from jankrun import LineReader
from target import Target

from .. import config
from ..config import UNIT
from ..procs import Fatal, proc_cpu_ns, proc_cpu_split_ns, run, say, spawn, stop
from ..runner import Jankbpf


def is_jank(r) -> bool:
    return r.get("type") == "jank"


def stack_log_share(path: str, is_root) -> dict:
    """What a jankbpf stack log holds: its header's samples, the sampling
    periods its tree counts (an off-CPU capture weighs the periods it slept:
    the header says 'counted in N sampling periods' when they differ from
    the samples), the periods whose path reaches a frame is_root(frame)
    accepts (counted at the outermost such frame), and its bytes. A share
    is periods of periods: the tree's counts are periods, not samples."""
    with open(path, errors="replace") as f:
        text = f.read()
    head = text.splitlines()[0] if text else ""
    m = re.search(r"(\d+) samples", head)
    samples = int(m.group(1)) if m else 0
    m = re.search(r"counted in (\d+) sampling periods", head)
    periods = int(m.group(1)) if m else samples
    reach = 0
    stack: list[tuple[int, bool]] = []  # (indent, root on the path so far)
    for line in text.splitlines()[1:]:
        mm = re.match(r"^(\s*)(\d+) #\d+ (.*)$", line)
        if not mm:
            continue
        indent, count, frame = len(mm.group(1)), int(mm.group(2)), mm.group(3)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        above = bool(stack) and stack[-1][1]
        hit = is_root(frame)
        if hit and not above:
            reach += count
        stack.append((indent, above or hit))
    return {"samples": samples, "periods": periods, "reach": reach, "bytes": len(text)}


def is_main_frame(frame: str) -> bool:
    """The program's entry: main, or where libc calls it when main was
    inlined into it (node: __libc_start_call_main -> node::Start)."""
    return bool(re.search(r"\((?:main|__libc_start_call_main)\+\d+\)", frame))


def frames_of(stack: str) -> str:
    """A heaviest_stack as 'leaf < caller < ... < main': function names
    only (no offsets, no C++ argument lists); a frame without a symbol shows
    its module."""
    syms = []
    for line in stack.splitlines():
        m = re.match(r"\s*#\d+ pc [0-9a-f]+ (.*)$", line)
        if not m:
            syms.append(line.strip().split(" ", 1)[-1])
            continue
        rest = m.group(1).strip()
        m = re.match(r"^(\S*?)\((.*)\)\(([0-9a-f]*)\)$", rest)
        if m and m.group(2) and not re.fullmatch(r"[0-9a-f]{16,}", m.group(2)):
            sym = re.sub(r"\+(0x)?[0-9a-f]+$", "", m.group(2))
            syms.append(sym.split("(")[0] or sym)
        else:
            syms.append(os.path.basename(rest.split("(")[0]) or "?")
    return " < ".join(syms)


def _log_share(jb) -> tuple[int, int, int, int, int]:
    """(logs, samples, sampling periods, periods to main, bytes) over a
    run's stack logs."""
    logs = jb.stack_logs()
    shares = [stack_log_share(f, is_main_frame) for f in logs]
    return (len(logs), sum(x["samples"] for x in shares), sum(x["periods"] for x in shares),
            sum(x["reach"] for x in shares), sum(x["bytes"] for x in shares))


def stacks(ctx) -> dict:
    say("7. stacks")
    res = {}
    helptext = run([config.JANKBPF, "--help"])
    res["options"] = sorted(set(re.findall(r"--(?:log-type|sample-[a-z]+|stack-[a-z]+)", helptext)))
    if os.path.exists(UNIT):
        r = subprocess.run([UNIT, "[stack-bench]"], capture_output=True, text=True, timeout=300)
        m = re.search(r"\[stack-bench\] (\d+) samples x5, (\d+) frames: cold first ([\d.]+) ms; "
                      r"warm p50 ([\d.]+) us, p99 ([\d.]+) us, max ([\d.]+) us", r.stdout)
        if m:
            res["unit"] = {"samples": int(m.group(1)), "frames": int(m.group(2)),
                           "cold_ms": float(m.group(3)), "p50_us": float(m.group(4)),
                           "p99_us": float(m.group(5)), "max_us": float(m.group(6))}
        else:
            res["unit_error"] = (r.stdout + r.stderr)[-500:]
    else:
        res["unit_error"] = f"{os.path.relpath(UNIT, config.ROOT)} not built"

    # One 800 ms spin on jank_target (-O2, no frame pointers), sampled at the
    # same time by jankbpf (its defaults) and by bpftrace's ustack at 199 Hz;
    # then again with --log-type 1 (stacks only, no trace) to split the cost.
    res["jankbpf"], res["bpftrace_ustack"], res["bpftrace_argv"] = stack_run([], with_bpftrace=True)
    res["jankbpf_stacks_only"], _, _ = stack_run(["--log-type", "1"], with_bpftrace=False)
    res["warm"] = warm_run()
    res["commands"] = [
        'build/jankbpf-unit "[stack-bench]"',
        "build/tests/jank_target --script spin:800,stuck --gap 100 --start-delay 3.5 --nice -20",
        "build/jankbpf --pid PID --ignore-startup-time 3 [--log-type 1]",
        res["bpftrace_argv"], res["warm"]["target_argv"],
        "build/jankbpf --pid PID --ignore-startup-time 3   # the warm run"]
    return res


def stack_run(args, with_bpftrace: bool):
    t = Target.start("spin:800,stuck", start_delay=3.5, gap_ms=100, nice=-20)
    bt_res, bt_argv = None, None
    try:
        jb = Jankbpf("--pid", str(t.pid), "--ignore-startup-time", "3", *args)
        if with_bpftrace:
            bt_script = "profile:hz:199 /pid == $1/ { @[ustack] = count(); }"
            bt_argv = ["bpftrace", "-B", "line", "-e", bt_script, str(t.pid)]
            bt = spawn(bt_argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            out = LineReader(bt.stdout)
            if not out.wait_for(r"^Attaching", 60):
                stop(bt, signal.SIGINT)
                raise Fatal("bpftrace (profile) failed to attach")
        own0, ch0 = proc_cpu_split_ns(jb.pid)
        t.wait_stuck(timeout=30)
        task = t.main_tasks()[-1]
        hit = jb.wait_record(is_jank, 30)
        own1, ch1 = proc_cpu_split_ns(jb.pid)
        if with_bpftrace:
            stop(bt, signal.SIGINT, 60)  # prints the map while the target is alive
            out.t.join(10)
        t.release()
        t.wait_done(30)
        t.wait(30)
        summary = jb.finish(exit_within=10)  # it exits by itself once its --pid target is gone
    finally:
        t.kill()
    nlogs, tot, periods, reach, size = _log_share(jb)
    rec = hit[1] if hit else {}
    res = {"args": args, "samples": summary.get("samples"), "offcpu": summary.get("offcpu_captures"),
           "lost": summary.get("samples_lost"), "dropped": summary.get("samples_dropped"),
           "logs": nlogs, "log_samples": tot, "log_periods": periods, "to_main": reach, "log_bytes": size,
           "heaviest": frames_of(rec.get("heaviest_stack", "")), "cpu_ms": (own1 - own0) / 1e6,
           "child_ms": (ch1 - ch0) / 1e6, "traces": summary.get("traces"),
           "arrival_ms": (hit[0] - task["end_ns"]) / 1e6 if hit else None,
           "task_ms": task["dur_ns"] / 1e6}
    if with_bpftrace:
        total = to_main = 0
        for m in re.finditer(r"@\[\n(.*?)\]: (\d+)", out.text() + "\n", re.S):
            frames = [f.strip() for f in m.group(1).splitlines() if f.strip()]
            n = int(m.group(2))
            total += n
            if any(re.match(r"main\+\d+$", f) for f in frames):
                to_main += n
        bt_res = {"samples": total, "to_main": to_main}
        bt_argv = config.disp(bt_argv[:-1] + ["PID"])
    return res, bt_res, bt_argv


def warm_run() -> dict:
    """jankbpf's own CPU per stack sample once the target's modules are
    cached (issue 12's warm figure): a 300 ms sleep that warms up, then
    WARM_TASKS spins of 400 ms (under the 450 ms trace threshold: no
    trace-cmd).
    CPU is schedstat (ns: ~50 us per sample is below /proc/PID/stat's 10 ms
    ticks) from the first record's arrival to the last's, over the samples
    of the records after the first."""
    n = 1 + config.WARM_TASKS
    # The warm-up task sleeps: its off-CPU capture's kernel stack loads
    # kallsyms, a cold cost (tens of ms) that a spin-only warm-up can leave
    # to a later task, inside the measured window.
    t = Target.start(f"sleep:300,spin:400x{n - 1}", start_delay=3.5, gap_ms=300, nice=-20)
    try:
        jb = Jankbpf("--pid", str(t.pid), "--ignore-startup-time", "3")
        first = jb.wait_record(is_jank, 30)
        if not first:
            raise Fatal("warm stacks run: no first jank record\n" + jb.stderr[-2000:])
        cpu0 = proc_cpu_ns(jb.pid)
        last, samples, janks = first, 0, 1
        while janks < n:
            hit = jb.wait_record(is_jank, 30, last[2] + 1)
            if not hit:
                break
            last, janks = hit, janks + 1
            samples += hit[1].get("samples", 0)
        cpu1 = proc_cpu_ns(jb.pid)
        t.wait(30)
        summary = jb.finish(exit_within=10)  # it exits by itself once its --pid target is gone
    finally:
        t.kill()
    return {"tasks": n, "janks": janks, "first_samples": first[1].get("samples", 0),
            "warm_samples": samples, "warm_cpu_ms": (cpu1 - cpu0) / 1e6,
            "us_per_sample": (cpu1 - cpu0) / 1e3 / samples if samples else None,
            "lost": summary.get("samples_lost"), "target_argv": config.disp(t.argv)}


def _frame_reader(tag: str, runtime: str) -> dict:
    """Runs the unit binary's [TAG] case, which times the ring thread's read
    of one sample's runtime frames, and parses its one line."""
    if not os.path.exists(UNIT):
        return {"error": f"{os.path.relpath(UNIT, config.ROOT)} not built"}
    r = subprocess.run([UNIT, f"[{tag}]"], capture_output=True, text=True, timeout=300)
    m = re.search(r"\[" + tag + r"\] (\S+), (\d+) (?:JS )?frames: runtime found in ([\d.]+) ms; cold first read "
                  r"([\d.]+) us; warm p50 ([\d.]+) us, p99 ([\d.]+) us, max ([\d.]+) us; ([\d.]+) reads per capture",
                  r.stdout)
    if not m:
        return {"error": (r.stdout + r.stderr)[-500:]}
    return {runtime: m.group(1), "frames": int(m.group(2)), "find_ms": float(m.group(3)),
            "cold_us": float(m.group(4)), "p50_us": float(m.group(5)), "p99_us": float(m.group(6)),
            "max_us": float(m.group(7)), "reads": float(m.group(8)),
            "commands": [f'build/jankbpf-unit "[{tag}]"']}


def python_reader(ctx) -> dict:
    """What reading one sample's Python frames costs the ring thread: the
    unit binary's [python-bench] case walks a live CPython 3.11 process
    spinning 30 Python frames deep, 5,000 times, with process_vm_readv."""
    say("7b. the Python frame reader")
    return _frame_reader("python-bench", "python")


def v8_reader(ctx) -> dict:
    """What reading one sample's JavaScript frames costs the ring thread:
    the unit binary's [v8-bench] case stops a live node spinning three JS
    functions deep once (ptrace) for its registers and stack, then walks
    that sample 5,000 times against the running process."""
    say("7c. the JavaScript frame reader")
    return _frame_reader("v8-bench", "node")


NODE_JS = r"""
// A jank every second: 600 ms of JavaScript on the event loop, from 4 s on.
function busy(ms) { const end = Date.now() + ms; let x = 0; while (Date.now() < end) x += Math.sqrt(x + 1); return x; }
let n = 0;
setTimeout(() => { const t = setInterval(() => { busy(600); if (++n >= 2) { clearInterval(t); } }, 1000); }, 4000);
"""


def node(ctx) -> dict:
    """Cold: the first stacks of a large binary (node, JIT frames and all)."""
    say("7c. stacks of node, cold then warm")
    node_bin = shutil.which("node")
    if not node_bin:
        return {"error": "node not installed"}
    p = spawn([node_bin, "-e", NODE_JS], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        jb = Jankbpf("--pid", str(p.pid), "--ignore-startup-time", "3")
        cpu0 = proc_cpu_split_ns(jb.pid)[0]
        first = jb.wait_record(is_jank, 30)
        cpu1 = proc_cpu_split_ns(jb.pid)[0]
        second = jb.wait_record(is_jank, 30, first[2] + 1 if first else 0)
        cpu2 = proc_cpu_split_ns(jb.pid)[0]
        p.wait(30)
        summary = jb.finish(exit_within=10)  # it exits by itself once its --pid target is gone
    finally:
        stop(p)
    res = {"samples": summary.get("samples"), "janks": summary.get("janks")}
    for key, hit, cpu in (("first", first, cpu1 - cpu0), ("second", second, cpu2 - cpu1)):
        if hit:
            r = hit[1]
            end_mono = r["begin_monotonic_ns"] + r["duration_ms"] * 1e6
            res[key] = {"cpu_ms": cpu / 1e6, "arrival_ms": (hit[0] - end_mono) / 1e6,
                        "heaviest": frames_of(r.get("heaviest_stack", "")),
                        "runnable_name": r.get("runnable_name", ""),
                        "js_frames": [f"{f['symbol']} ({f.get('file', '')})" for f in r.get("stack", [])
                                      if f.get("runtime") == "js"]}
    nlogs, tot, periods, reach, _ = _log_share(jb)
    # JavaScript frames named with no flag (issue 13): in the records'
    # heaviest stacks, and what the summary counts.
    js = [f for k in ("first", "second") if k in res for f in res[k]["js_frames"]]
    res.update(js_named=sorted(set(js)), runtime_frames=summary.get("runtime_frames", {}))
    res.update(log_samples=tot, log_periods=periods, to_main=reach, logs=nlogs,
               commands=["node -e '<600 ms of JavaScript per jank: NODE_JS in bench/jankbench/scenarios/stacks.py>'",
                         "build/jankbpf --pid PID --ignore-startup-time 3"])
    return res
