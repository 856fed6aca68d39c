"""Section 3: exec -> attached, and stop, for jankbpf, bpftrace and BCC,
interleaved."""
from __future__ import annotations

import os
import shutil
import signal
import tempfile

from .. import config
from ..peers import Bpftrace, bcc_startup
from ..procs import Fatal, say, spawn, stop
from ..runner import Jankbpf, log_root


def startup(ctx) -> dict:
    say("3. startup: exec -> attached")
    res = {"jankbpf": [], "jankbpf_recorder": [], "jankbpf_stop": [], "bpftrace": [], "bpftrace_attaching": [],
           "bpftrace_stop": [], "bcc": [], "bcc_stop": []}
    tmp = tempfile.mkdtemp(prefix="startup-", dir=log_root())
    sentinel = os.path.join(tmp, "jank_sentinel.bt")
    with open(config.JANK_BT) as f:
        text = f.read()
    # Declared last, so attached last: bpftrace attaches probes one by one in
    # the order of the script, and prints "Attaching N probes..." before the
    # first. The trigger calls getppid() every ~100 us.
    text += ("\ntracepoint:syscalls:sys_enter_getppid /pid == $2 && @seen == 0/\n"
             "{\n\t@seen = 1;\n\tprintf(\"sentinel: attached\\n\");\n}\n")
    with open(sentinel, "w") as f:
        f.write(text)
    trigger = spawn([config.GETPPID, "--trigger"])
    try:
        for _ in range(config.STARTUP_REPS):
            # -v for the line that says the trace recorder is ready: it is
            # set up beside the BPF load and may finish after the attach.
            jb = Jankbpf("-v")
            res["jankbpf"].append((jb.t_attached - jb.t_exec) / 1e6)
            ready = jb.wait_stderr("ftrace instance", 10)
            if ready is None:
                jb.finish()
                raise Fatal("jankbpf -v never said its ftrace instance was ready:\n" + jb.stderr[-2000:])
            res["jankbpf_recorder"].append((ready - jb.t_exec) / 1e6)
            jb.finish()
            res["jankbpf_stop"].append(jb.stop_s * 1e3)
            # The waits by two raw tracepoints (x86_64): no syscall
            # tracepoint's perf event to close at the stop (README, Stopping).
            if os.uname().machine == "x86_64":
                jb = Jankbpf("-v", "--hooks", "raw-tracepoint")
                res.setdefault("jankbpf_raw", []).append((jb.t_attached - jb.t_exec) / 1e6)
                jb.finish()
                res.setdefault("jankbpf_raw_stop", []).append(jb.stop_s * 1e3)

            bt = Bpftrace(sentinel, str(config.THRESHOLD_MS), str(trigger.pid))
            res["bpftrace_attaching"].append((bt.t_attaching - bt.t_exec) / 1e6)
            hit = bt.out.wait_for(r"^sentinel: attached", 60)
            if not hit:
                bt.stop()
                raise Fatal("bpftrace's sentinel probe never fired:\n" + bt.err.text()[-2000:])
            res["bpftrace"].append((hit[0] - bt.t_exec) / 1e6)
            res["bpftrace_stop"].append(bt.stop() * 1e3)

            attached_ms, stop_ms = bcc_startup(ctx.bcc_env)
            res["bcc"].append(attached_ms)
            res["bcc_stop"].append(stop_ms)
    finally:
        stop(trigger, signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)
    res["reps"] = config.STARTUP_REPS
    res["commands"] = [
        "build/jankbpf -v",
        "build/jankbpf -v --hooks raw-tracepoint   # x86_64",
        f"bpftrace -B line bench/jank.bt {config.THRESHOLD_MS} TRIGGER_PID   # plus the sentinel probe",
        f"BCC_KERNEL_SOURCE=... /usr/bin/python3 bench/jank_bcc.py {config.THRESHOLD_MS}",
        "build/bench/getppid --trigger   # the sentinel's trigger"]
    return res
