"""Sections 5 and 4: accuracy and latency on jank_target's scripted tasks,
and jankbpf's footprint idle and janky."""
from __future__ import annotations

import os
import time

from target import Target

from .. import config
from ..config import HANG_MS, THRESHOLD_MS
from ..procs import proc_counters, say
from ..runner import Jankbpf


def accuracy(ctx) -> dict:
    say("5. accuracy and latency on jank_target")
    rep = 1 if config.QUICK else 3
    script = (f"spin:200x{rep},sleep:300x{rep},io:250x{rep},runnable:300x{rep},short:2000,"
              f"spin:100x{rep},sleep:140x{rep},spin:160,stuck,sleep:200")
    t = Target.start(script, start_delay=3.5, gap_ms=100)
    res = {"script": script, "target_argv": config.disp(t.argv), "threshold_ms": THRESHOLD_MS,
           "hang_ms": HANG_MS, "check_interval_ms": config.CHECK_INTERVAL_MS}
    try:
        jb = Jankbpf("--pid", str(t.pid), "--ignore-startup-time", "3")
        stuck = t.wait_stuck(timeout=60)
        hang = jb.wait_record(lambda r: r.get("type") == "hang", (HANG_MS + 10000) / 1e3)
        t.release()
        t.wait_done(60)
        rc = t.wait(30)
        summary = jb.finish(exit_within=15)  # it exits by itself once its --pid target is gone
        res["target_exit"] = rc
    finally:
        t.kill()
    thr_ns = THRESHOLD_MS * 1e6
    truth = [x for x in t.main_tasks()]
    janks = [(a, r) for a, r in jb.timed("jank") if r["tid"] == t.pid]
    errors, matched, spurious, arrival_ms, rows = [], set(), [], [], []
    for arr, r in janks:
        b = r["begin_monotonic_ns"]
        cand = [x for x in truth if x.get("kind") != "short" and abs(x["begin_ns"] - b) < 5e6]
        if not cand:
            spurious.append(r)
            continue
        x = min(cand, key=lambda x: abs(x["begin_ns"] - b))
        if x["dur_ns"] < thr_ns:
            spurious.append(r)
            continue
        matched.add(x["task"])
        err = r["duration_ms"] - x["dur_ns"] / 1e6
        errors.append(err)
        arrival_ms.append((arr - x["end_ns"]) / 1e6)
        rows.append({"kind": x["kind"], "arg": x["arg"], "true_ms": x["dur_ns"] / 1e6,
                     "reported_ms": r["duration_ms"], "err_ms": err,
                     "dominant": max(r["state_ms"], key=r["state_ms"].get),
                     "arrival_ms": (arr - x["end_ns"]) / 1e6,
                     "logs": ",".join(sorted({os.path.basename(l).split("-")[0] for l in r.get("external_log", [])}))})
    long_truth = [x for x in truth if x.get("max_dur_ns", x["dur_ns"]) >= thr_ns]
    missed = [x for x in long_truth if x["task"] not in matched]
    res.update(rows=rows, errors=errors, missed=missed, spurious=spurious, n_truth_long=len(long_truth),
               n_truth_short=sum(x.get("count", 1) for x in truth if x.get("max_dur_ns", x["dur_ns"]) < thr_ns),
               arrival_ms=arrival_ms, summary=summary,
               heaviest=[r.get("heaviest_stack", "") for _, r in janks],
               external_logs=[r.get("external_log", []) for _, r in janks])
    if hang:
        arr, h, _ = hang
        due_mono = stuck["begin_ns"] + HANG_MS * 1e6
        res["hang"] = {
            "kernel_late_ms": h["duration_ms"] - HANG_MS,
            "record_late_ms": h["time"] - t.epoch_ms(due_mono),
            "arrival_late_ms": (arr - due_mono) / 1e6,
            "begin_err_ms": (h["begin_monotonic_ns"] - stuck["begin_ns"]) / 1e6,
        }
    else:
        res["hang"] = None
    res["commands"] = [res["target_argv"], "build/jankbpf --pid PID --ignore-startup-time 3"]
    return res


def _window(a, b, na, nb, secs):
    return {"secs": secs, "cpu_s": (b["cpu_ns"] - a["cpu_ns"]) / 1e9,
            "child_s": (b["child_ns"] - a["child_ns"]) / 1e9, "vol": b["vol"] - a["vol"],
            "nonvol": b["nonvol"] - a["nonvol"], "records": nb - na, "hwm_kb": b["hwm_kb"],
            "rss_kb": b["rss_kb"]}


def footprint(ctx) -> dict:
    IDLE_S, JANKY_S, NOSTACK_S = config.IDLE_S, config.JANKY_S, config.NOSTACK_S
    say(f"4. footprint: idle {IDLE_S} s, then a jank every 200 ms for {JANKY_S} s; "
        f"then {NOSTACK_S} s of janks without stacks")
    # Both targets start first and idle until their turn: old enough for the
    # ignore-startup rule (10 s) when their tasks begin. T2 also serves as
    # "one idle process" for a second jankbpf, --pid T2, during the idle window.
    t1 = Target.start(f"sleep:170x{JANKY_S * 5}", start_delay=IDLE_S + 3, gap_ms=30)
    t2 = Target.start(f"sleep:170x{NOSTACK_S * 5}", start_delay=IDLE_S + JANKY_S + 8, gap_ms=30)
    res = {"target_argv": config.disp(t1.argv)}
    try:
        jb = Jankbpf()
        watch = Jankbpf("--pid", str(t2.pid))
        time.sleep(1.0)
        c0, w0 = proc_counters(jb.pid), proc_counters(watch.pid)
        n0, m0 = len(jb.timed()), len(watch.timed())
        time.sleep(IDLE_S)
        c1, w1 = proc_counters(jb.pid), proc_counters(watch.pid)
        n1, m1 = len(jb.timed()), len(watch.timed())
        watch.finish()
        t1.wait_tasks(1, timeout=30)
        c2 = proc_counters(jb.pid)
        n2 = len(jb.timed())
        time.sleep(JANKY_S)
        c3 = proc_counters(jb.pid)
        n3 = len(jb.timed())
        mine = [r for _, r in jb.timed("jank") if r["pid"] == t1.pid]
        res["logs"] = len(jb.logs())
        summary = jb.finish()

        # Without stacks (--log-type 2: traces only), the RSS goal's case.
        ns = Jankbpf("--log-type", "2")
        time.sleep(0.5)
        t2.wait_tasks(1, timeout=60)
        d0 = proc_counters(ns.pid)
        k0 = len(ns.timed())
        time.sleep(NOSTACK_S)
        d1 = proc_counters(ns.pid)
        k1 = len(ns.timed())
        ns_summary = ns.finish()
    finally:
        t1.kill()
        t2.kill()
    res["idle"] = _window(c0, c1, n0, n1, IDLE_S)
    res["watch_idle"] = _window(w0, w1, m0, m1, IDLE_S)
    res["janky"] = _window(c2, c3, n2, n3, JANKY_S)
    res["janky"]["target_janks"] = len(mine)
    res["nostack"] = _window(d0, d1, k0, k1, NOSTACK_S)
    res["threads"] = c3["threads"]
    res["summary"] = summary
    res["nostack_summary"] = ns_summary
    res["commands"] = [res["target_argv"], "build/jankbpf", "build/jankbpf --pid PID   # PID: the second, idle target",
                       "build/jankbpf --log-type 2"]
    return res
