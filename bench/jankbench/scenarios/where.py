"""Section 1b, where the throughput goes (issue 30, item 1): the extra CPU
a request costs under jankbpf and under bpftrace, split by what ran.

Each run samples the whole machine with `perf record -a` on the cpu-clock
(this VM has no hardware counters: no cycles, no cache misses) while one
workload runs, with nothing attached, with jankbpf (defaults) and with
bench/jank.bt, in turn, ROUNDS times. Each sample is the leaf function the
CPU was in; it is put in one bucket by who ran (the server, the tool's own
threads, the client, anything else) and, for the server, by what the
function is (BPF program, interrupts-off section, ftrace event recording,
tracepoint dispatch, clock read, syscall slow path, perf events,
scheduler, other kernel, user space). A bucket's samples times the
sampling period over the requests served is its CPU per request; the
difference to the same round's baseline is what the tool added there."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import time

from .. import config
from ..procs import Fatal, proc_counters, say, spawn, stop
from .load import attach, detach

CONFIGS = ["none", "jankbpf", "bpftrace"]
WORKLOADS = ("redis SET", "ping-pong")
PERIOD_NS = 250_000  # one sample per 250 µs of CPU: 4 kHz a CPU
ROUNDS = 2 if config.QUICK else 3

# The server's kernel time by what the leaf function is; the first match
# wins, so dispatch is tested before the generic bpf_ helpers.
KERNEL_KINDS = [
    ("BPF programs", re.compile(r"^(bpf_prog_|bpf_trampoline_)")),
    # The cpu-clock is a timer interrupt: a sample due while interrupts are
    # off lands where they come back on. sched_switch runs under the rq lock
    # and the wakeup tracepoints under pi_lock, both with interrupts off, so
    # the time of their programs (anyone's) shows here, not in the buckets above.
    ("interrupts-off sections (switch and wakeup hooks run in them)", re.compile(
        r"^(finish_task_switch(\.isra\.\d+)?|_raw_spin_unlock_irqrestore|_raw_spin_unlock_irq|"
        r"raw_spin_rq_unlock_irq)$")),
    # Events written into an ftrace instance's ring buffer: jankbpf keeps
    # one recording the scheduler and interrupt events, for its traces.
    ("ftrace event recording (a trace instance's buffer)", re.compile(
        r"^(trace_event_raw_event_|trace_event_buffer_(reserve|commit)|__rb_reserve_next|rb_commit|rb_move_tail|"
        r"ring_buffer_(lock_reserve|unlock_commit)|trace_buffer_lock_reserve|tracing_gen_ctx|__trace_)")),
    ("tracepoint and BPF dispatch", re.compile(
        r"^(trace_call_bpf|bpf_trace_run\d+|__bpf_trace_|perf_trace_|__traceiter_|"
        r"perf_syscall_(enter|exit)|__bpf_prog_(enter|exit)|migrate_(enable|disable)$)")),
    ("BPF helpers and maps", re.compile(
        r"^(bpf_|__bpf_|htab_|__htab_|array_map_|ringbuf_|__bpf_ringbuf|bpf_ringbuf|task_storage_|"
        r"bpf_local_storage|bpf_task_storage|pcpu_freelist|lookup_nulls_elem_raw|lookup_elem_raw|jhash)")),
    ("clock reads", re.compile(r"^(read_tsc|ktime_get(_ns|_mono_fast_ns|_boot_fast_ns)?|native_sched_clock|"
                               r"kvm_clock_(get_cycles|read)|pvclock_clocksource_read)$")),
    ("syscall slow path (entry and exit work)", re.compile(
        r"^(syscall_trace_enter|syscall_exit_work|syscall_enter_from_user_mode_work|"
        r"trace_sys_(enter|exit)|audit_)")),
    ("perf events", re.compile(r"^(perf_|__perf_|ctx_sched_|event_sched_|group_sched_|visit_groups_merge|"
                               r"merge_sched_in|ctx_resched)")),
    ("scheduler (switches, wakeups)", re.compile(
        r"^(schedule|__schedule|finish_task_switch|pick_next_|enqueue_|dequeue_|try_to_wake_up|ttwu_|"
        r"select_task_rq|update_curr|update_load_avg|psi_|__switch_to|switch_mm|check_preempt|resched_|"
        r"set_next_entity|put_prev_|update_rq_clock|sched_)")),
]
SERVER_KINDS = [k for k, _ in KERNEL_KINDS] + ["other kernel", "user space (the server's own code)"]
OTHERS = ["the tool's own threads", "the client (redis-benchmark)", "other processes"]

_LINE = re.compile(r"^\s*(?P<comm>.*?)\s+(?P<pid>-?\d+)/(?P<tid>-?\d+)\s+(?P<time>\d+\.\d+):\s+"
                   r"(?P<ip>[0-9a-f]+)\s+(?P<rest>.*)$")


def kind_of(sym: str, dso: str) -> str:
    """The server bucket of one sample's leaf function."""
    if dso.startswith("[kernel") or dso.startswith("[bpf") or sym.startswith("bpf_prog_"):
        for name, rx in KERNEL_KINDS:
            if rx.search(sym):
                return name
        return "other kernel"
    return "user space (the server's own code)"


def parse_samples(text: str):
    """(pid, monotonic s, sym, dso, comm) of each `perf script` line."""
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        rest = m["rest"].rstrip()
        sym, dso = rest, ""
        if rest.endswith(")") and " (" in rest:
            sym, dso = rest.rsplit(" (", 1)
            dso = dso[:-1]
        yield int(m["pid"]), float(m["time"]), sym.strip(), dso, m["comm"]


CLIENT = "redis-benchmark"


def bucket(samples, window, server: set[int], tool: int | None) -> dict:
    """Samples inside the window, by bucket: the server's by kind, the rest
    by who (the client by its name: it runs only inside the window)."""
    t0, t1 = window
    out: dict[str, int] = {}
    for pid, t, sym, dso, comm in samples:
        if not t0 <= t <= t1 or pid <= 0:
            continue  # idle (pid 0) and samples before or after the workload
        if pid in server:
            key = kind_of(sym, dso)
        elif tool is not None and pid == tool:
            key = OTHERS[0]
        elif comm == CLIENT:
            key = OTHERS[1]
        else:
            key = OTHERS[2]
        out[key] = out.get(key, 0) + 1
    return out


def server_symbols(samples, window, server: set[int], most: int = 40) -> dict:
    """The server's samples by leaf function, the `most` most sampled."""
    t0, t1 = window
    count: dict[str, int] = {}
    for pid, t, sym, dso, _ in samples:
        if pid in server and t0 <= t <= t1:
            kernel = dso.startswith("[") or sym.startswith("bpf_prog_")
            key = sym if kernel else f"{sym} ({os.path.basename(dso)})"
            count[key] = count.get(key, 0) + 1
    return dict(sorted(count.items(), key=lambda kv: -kv[1])[:most])


def hardware_counters() -> str:
    """What `perf stat` says of cycles and cache misses here."""
    r = subprocess.run(["perf", "stat", "-x,", "-e", "cycles,cache-misses", "true"], capture_output=True,
                       text=True)
    fields = [l.split(",") for l in r.stderr.splitlines() if l.count(",") >= 2]
    return "; ".join(f"{f[2]} {f[0]}" for f in fields) or r.stderr.strip()[-200:]


class Perf:
    """`perf record -a` on the cpu-clock, its times in CLOCK_MONOTONIC (the
    clock of time.monotonic()), so a workload's window can be cut out."""

    def __init__(self, path: str):
        self.path = path
        self.proc = spawn(["perf", "record", "-q", "-a", "-e", "cpu-clock", "-c", str(PERIOD_NS),
                           "-k", "CLOCK_MONOTONIC", "-o", path], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)  # its set-up (a pass over /proc) is over before the workload starts
        if self.proc.poll() is not None:
            raise Fatal(f"perf record failed: {self.proc.stderr.read()[-1000:]}")

    def samples(self) -> list:
        stop(self.proc, signal.SIGINT, 60)
        r = subprocess.run(["perf", "script", "-i", self.path, "-F", "comm,pid,tid,time,ip,sym,dso"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise Fatal(f"perf script failed: {r.stderr[-1000:]}")
        os.unlink(self.path)
        return list(parse_samples(r.stdout))


def where(ctx) -> dict:
    wl = ctx.workloads()
    wl.ready()
    chosen = [w for w in wl.list if w["name"] in WORKLOADS]
    say(f"1b. where the throughput goes: perf record -a, {ROUNDS} rounds of {' '.join(CONFIGS)}")
    runs = {cfg: {w["name"]: [] for w in chosen} for cfg in CONFIGS}
    with tempfile.TemporaryDirectory(prefix="jankbpf-where-") as tmp:
        for r in range(ROUNDS):
            for cfg in CONFIGS:
                tool = attach(cfg)
                try:
                    for w in chosen:
                        server = set(wl.pp.pids) if w["kind"] == "pingpong" else {wl.redis.pid}
                        before = [proc_counters(p) for p in server]
                        perf = Perf(os.path.join(tmp, "perf.data"))
                        t0 = time.monotonic()
                        res = wl.run(w)
                        t1 = time.monotonic()
                        samples = perf.samples()
                        after = [proc_counters(p) for p in server]
                        res["seconds"] = t1 - t0
                        res["switches"] = sum(a["vol"] + a["nonvol"] - b["vol"] - b["nonvol"]
                                              for a, b in zip(after, before))
                        res["buckets"] = bucket(samples, (t0, t1), server, tool.pid if tool else None)
                        res["symbols"] = server_symbols(samples, (t0, t1), server)
                        runs[cfg][w["name"]].append(res)
                finally:
                    if tool is not None:
                        detach(cfg, tool)
            say(f"  round {r + 1}/{ROUNDS} done")
    return {"rounds": ROUNDS, "period_ns": PERIOD_NS, "configs": CONFIGS, "workloads": list(WORKLOADS),
            "server_kinds": SERVER_KINDS, "others": OTHERS, "runs": runs,
            "hardware_counters": hardware_counters(),
            "commands": [f"perf record -q -a -e cpu-clock -c {PERIOD_NS} -k CLOCK_MONOTONIC -o perf.data",
                         "perf script -F comm,pid,tid,time,ip,sym,dso"]}
