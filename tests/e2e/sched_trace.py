"""A second, independent account of a thread's scheduler states, from an
ftrace instance of its own: sched_wakeup and sched_switch as the kernel
printed them, on the clock jankbpf's records use (mono).

The thread's own clocks (CPU time, schedstat's run_delay) are read on the
scheduler's clock at its own updates, not at the tracepoints jankbpf and
this trace stamp, and a fault or switch costs thousands of such gaps a
task; this account is stamped where jankbpf's is, by other code.
"""
import os
import re
import subprocess

TRACEFS = "/sys/kernel/tracing"
EVENT = re.compile(r"\s(\d+)\.(\d{6}): (sched_switch|sched_wakeup|sched_wakeup_new): (.*)$")
FIELD = re.compile(r"(\w+)=(\S+)")
# Per CPU: a few thousand events a test at most, filtered to the targets.
BUFFER_KB = 8192


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


class SchedTrace:
    """Records the scheduler events of threads whose comm matches one of
    `comms` (ftrace globs) until stop(); split() then gives the state time of
    one thread over a window, as jankbpf's state_ms names them."""

    def __init__(self, comms):
        if not os.path.isdir(os.path.join(TRACEFS, "events")):
            subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], check=True)
        self.dir = os.path.join(TRACEFS, "instances", f"jankbpf-e2e-sched-{os.getpid()}")
        if os.path.isdir(self.dir):
            os.rmdir(self.dir)
        os.mkdir(self.dir)
        self.events = None
        try:
            _write(os.path.join(self.dir, "buffer_size_kb"), str(BUFFER_KB))
            _write(os.path.join(self.dir, "trace_clock"), "mono")
            match = lambda field: " || ".join(f'{field} ~ "{c}"' for c in comms)
            sched = os.path.join(self.dir, "events", "sched")
            _write(os.path.join(sched, "sched_switch", "filter"), f"{match('prev_comm')} || {match('next_comm')}")
            for ev in ("sched_wakeup", "sched_wakeup_new"):
                _write(os.path.join(sched, ev, "filter"), match("comm"))
            for ev in ("sched_switch", "sched_wakeup", "sched_wakeup_new"):
                _write(os.path.join(sched, ev, "enable"), "1")
            _write(os.path.join(self.dir, "tracing_on"), "1")
        except Exception:
            self.close()
            raise

    def overruns(self):
        """Events the ring lost, summed over CPUs: the account is whole only at 0."""
        total = 0
        for cpu in os.listdir(os.path.join(self.dir, "per_cpu")):
            with open(os.path.join(self.dir, "per_cpu", cpu, "stats")) as f:
                for line in f:
                    if line.startswith("overrun:"):
                        total += int(line.split()[1])
        return total

    def stop(self):
        """Stops recording and parses what was recorded (once)."""
        if self.events is not None:
            return
        _write(os.path.join(self.dir, "tracing_on"), "0")
        lost = self.overruns()
        assert lost == 0, f"the sched trace lost {lost} events: its account is not whole"
        with open(os.path.join(self.dir, "trace"), errors="replace") as f:
            self.events = parse(f)

    def close(self):
        if os.path.isdir(self.dir):
            try:
                _write(os.path.join(self.dir, "tracing_on"), "0")
            except OSError:
                pass
            os.rmdir(self.dir)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def of_jank(self, jank, tid=None):
        """{running, runnable, sleeping, blocked_io} ms of thread `tid` (the
        record's own by default) over a jank record's span; fails when the
        trace never placed the thread in a state before the span began."""
        return self._over(split, jank, tid)

    def stretches_of(self, jank, tid=None):
        """The (state, start_ns, end_ns) stretches of thread `tid` over a
        jank record's span, as of_jank() sums them."""
        return self._over(stretches, jank, tid)

    def unseen_in(self, jank, tid=None):
        """Switches of the thread over a jank record's span that the trace
        missed (see unseen())."""
        self.stop()
        tid = jank["tid"] if tid is None else tid
        begin = jank["begin_monotonic_ns"]
        return unseen(self.events, tid, begin, begin + round(jank["duration_ms"] * 1e6))

    def delivery_of(self, jank, tid=None):
        """The ms thread `tid` (the record's own) queued for a CPU between its
        last wakeup before the jank began and that begin: the delivery, by the
        trace's stamps. None where the trace cannot tell (see delivery())."""
        self.stop()
        tid = jank["tid"] if tid is None else tid
        return delivery(self.events, tid, jank["begin_monotonic_ns"])

    def _over(self, account, jank, tid):
        self.stop()
        tid = jank["tid"] if tid is None else tid
        begin = jank["begin_monotonic_ns"]
        found = account(self.events, tid, begin, begin + round(jank["duration_ms"] * 1e6))
        assert found is not None, f"the sched trace never placed thread {tid} before its task"
        return found


def parse(lines):
    """The scheduler events of ftrace's text output, in time order: (ns,
    event name, {field: value}). The timestamps are µs (the text's own)."""
    events = []
    for line in lines:
        m = EVENT.search(line)
        if m:
            ts = int(m.group(1)) * 1_000_000_000 + int(m.group(2)) * 1000
            events.append((ts, m.group(3), dict(FIELD.findall(m.group(4)))))
    events.sort(key=lambda e: e[0])
    return events


def stretches(events, tid, begin_ns, end_ns):
    """Thread `tid`'s stretches in one state over [begin_ns, end_ns), in
    time order: (state, start_ns, end_ns), cut to the window; None when no
    event placed the thread before begin_ns."""
    tid = str(tid)
    state, since, out = None, None, []
    for ts, kind, f in events:
        if ts >= end_ns:
            break
        new = None
        if kind == "sched_switch" and f.get("prev_pid") == tid:
            new = sleep_state(f.get("prev_state", "R"))
        elif kind == "sched_switch" and f.get("next_pid") == tid:
            new = "running"
        elif kind != "sched_switch" and f.get("pid") == tid and state not in ("running", "runnable"):
            new = "runnable"
        if new is None:
            continue
        if since is None and ts > begin_ns:
            return None
        if since is not None and ts > begin_ns:
            out.append((state, max(since, begin_ns), ts))
        state, since = new, ts
    if since is None:
        return None
    if end_ns > max(since, begin_ns):
        out.append((state, max(since, begin_ns), end_ns))
    return out


def unseen(events, tid, begin_ns, end_ns):
    """How many of thread `tid`'s switches over a task's span [begin_ns,
    end_ns) the trace itself missed: a switch-out of a thread it had not
    switched in, a switch-in of one it had not switched out, a wakeup of
    one it had queued (it ran and slept since, both unseen), and the thread
    not running at the task's begin or end (a task begins and ends in its
    thread's own context; seen: a 200 ms spin traced as queued throughout,
    its switch-in unseen). Kernels that hide a host agent's threads from
    tracing (CI's sandbox) trace no switch to or from them; over such a gap
    this account is no truth either."""
    tid = str(tid)
    state, missed, at_begin = None, 0, None
    for ts, kind, f in events:
        if ts >= end_ns:
            break
        if ts >= begin_ns and at_begin is None:
            at_begin = state
        if kind != "sched_switch":
            if f.get("pid") == tid:
                missed += ts >= begin_ns and state == "runnable"
                if state not in ("running", "runnable"):
                    state = "runnable"
            continue
        if f.get("prev_pid") == tid:
            missed += ts >= begin_ns and state is not None and state != "running"
            state = "off"
        elif f.get("next_pid") == tid:
            missed += ts >= begin_ns and state == "running"
            state = "running"
    if at_begin is None:
        at_begin = state
    return missed + (at_begin not in (None, "running")) + (state not in (None, "running"))


def delivery(events, tid, begin_ns):
    """Thread `tid`'s time queued for a CPU from its last wakeup before
    begin_ns to begin_ns, in ms: what a wait's delivery counts when the task
    begins at the wait's return. None when no wakeup precedes begin_ns, or a
    switch between them went unseen (a wakeup of a queued thread, a switch-in
    of a running one, a switch-out of one not running), or the thread is not
    on a CPU at begin_ns (a task begins in its own context)."""
    tid = str(tid)
    state, since, woken, queued, missed = None, None, None, 0, 0
    for ts, kind, f in events:
        if ts >= begin_ns:
            break
        if kind != "sched_switch":
            if f.get("pid") != tid:
                continue
            if state == "runnable":
                missed += 1
            if state not in ("running", "runnable"):
                state, since, woken, queued, missed = "runnable", ts, ts, 0, 0
            continue
        if f.get("prev_pid") == tid:
            missed += state is not None and state != "running"
            state, since = ("runnable" if sleep_state(f.get("prev_state", "R")) == "runnable" else "off"), ts
        elif f.get("next_pid") == tid:
            if state == "runnable":
                queued += ts - since
            else:
                missed += state is not None
            state, since = "running", ts
    if woken is None or missed or state != "running":
        return None
    return queued / 1e6


def blocked_of(text, tid, begin_ns, end_ns):
    """Thread `tid`'s ms blocked (D) over [begin_ns, end_ns), and in how many
    stretches, from a trace in text that ends with its "overrun: N" line
    (the kernel lane's guest-init.sh, sched_trace_off). Raises ValueError
    saying why the account is not whole: events lost, a switch the trace
    missed, the thread never placed before the window."""
    m = re.search(r"^overrun: (\d+)$", text, re.M)
    if not m or m.group(1) != "0":
        raise ValueError(f"the sched trace lost events: {m and m.group(1)}")
    events = parse(text.splitlines())
    missed = unseen(events, tid, begin_ns, end_ns)
    if missed:
        raise ValueError(f"the sched trace missed {missed} switches of {tid}")
    found = stretches(events, tid, begin_ns, end_ns)
    if found is None:
        raise ValueError(f"the sched trace never placed thread {tid} before its task")
    blocked = [(lo, hi) for state, lo, hi in found if state == "blocked_io"]
    return sum(hi - lo for lo, hi in blocked) / 1e6, len(blocked)


def split(events, tid, begin_ns, end_ns):
    """The state split of thread `tid` over [begin_ns, end_ns), as stretches()
    summed per state in ms; None when no event placed the thread before
    begin_ns."""
    parts = {"running": 0.0, "runnable": 0.0, "sleeping": 0.0, "blocked_io": 0.0}
    found = stretches(events, tid, begin_ns, end_ns)
    if found is None:
        return None
    for state, lo, hi in found:
        parts[state] += (hi - lo) / 1e6
    return parts


def sleep_state(prev_state):
    """The state a switch-out leaves the thread in, as jankbpf classes it:
    preempted (R, R+) queued; D without N (TASK_NOLOAD, printed as I) blocked
    on I/O; anything else asleep."""
    if prev_state.startswith("R"):
        return "runnable"
    flags = set(prev_state.split("|"))
    if "D" in flags and "I" not in flags and "N" not in flags:
        return "blocked_io"
    return "sleeping"
