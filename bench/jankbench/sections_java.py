"""Sections 7e and 7f (issue 29): the Java frame reader, a JVM's loop threads; section 11 (issue 27):
the planted causes."""
from __future__ import annotations

from .stats import fmt, median, reach_share


def hotspot(doc, d):
    if "compiled-leaf" not in d:
        doc.p(f"Not run ({d.get('error', '?')}).", term=True)
        return
    c = d["compiled-leaf"]
    doc.p("`build/jankbpf-unit \"[hotspot-bench]\"`: the ring thread's read of one sample's Java frames from a "
          f"live flagless JVM ({c['java']}, tests/apps/java/HsSpin.java), 5,000 reads each, process_vm_readv; "
          f"HotSpot's tables read in {c['find_ms']:.1f} ms once per JVM.", term=True)
    rows = []
    for key, what in (("compiled-leaf", "a compiled leaf, from its registers"),
                      ("native-leaf", "a thread in Thread.sleep, from its last Java frame"),
                      ("interpreted", "-Xint, the leaf's bcp from r13")):
        r = d.get(key)
        if r:
            rows.append([what, f"{r['frames']} ({r['interpreted']} interpreted, {r['compiled']} compiled, "
                         f"{r['unreadable']} unreadable)", f"{r['cold_us']:.0f}", f"{r['p50_us']:.1f}",
                         f"{r['p99_us']:.1f}", f"{r['reads']:.0f}"])
    doc.table(["sample", "Java frames", "cold µs", "warm p50 µs", "p99 µs", "system calls"], rows)


def jvm(doc, d):
    if "error" in d:
        doc.p(f"Not run ({d['error']}).", term=True)
        return
    rf = d.get("runtime_frames", {})
    doc.p(f"`java -cp DIR LoopServer` with no JVM option (the JDK's HttpServer and an NIO loop, "
          f"tests/apps/java/LoopServer.java) under `--threads main`: exit {d['rc']}, {len(d['janks'])} janks, "
          f"{d.get('samples')} samples; Java frames placed {rf.get('read', 0)}, unreadable "
          f"{rf.get('unreadable', 0)}; stack logs: {reach_share(d, 'to_thread_run')} reach "
          f"`java.lang.Thread.run`.", term=True)
    doc.table(["thread", "ms", "runnable_name", "innermost Java frame", "Java frames (jit / inlined / "
               "unreadable)", "jvm_pause"],
              [[j["thread"], f"{j['ms']:.0f}", f"`{j['runnable_name']}`", f"`{j['leaf']}`",
                f"{j['java']} ({j['jit']} / {j['inlined']} / {j['unreadable']})",
                f"{j['jvm_pause']['kind']} {j['jvm_pause'].get('operation', '')} {j['jvm_pause']['ms']:.0f} ms"
                if j.get("jvm_pause") else ""] for j in d["janks"]])


def _cause_table(doc, rows_in):
    from .goals import cause_named
    by = {}
    for r in rows_in:
        by.setdefault(r["cause"], []).append(r)
    rows = []
    for cause, rs in by.items():
        errs = [abs(r["ms"] - r["truth_ms"]) / r["truth_ms"] * 100 for r in rs if r.get("ms") is not None]
        missed = [r for r in rs if not cause_named(r)]
        rows.append([cause, rs[0]["expected"]["kind"], len(rs), sum(1 for r in rs if cause_named(r)),
                     f"{fmt(median(errs), '.1f')} / {fmt(max(errs), '.1f')}" if errs else "",
                     ", ".join(sorted({k for k in rs[0]["expected"] if k != "kind"})),
                     (missed[0].get("why") or missed[0].get("note") or "")[:120] if missed else ""])
    doc.table(["cause", "kind", "trials", "named", "time error % (median / max)", "identity checked",
               "first miss: its why"], rows)


def causes(doc, d):
    doc.p(f"`tests/apps/cause_target` plants one cause per task and measures it itself (its own wait); "
          f"`jankbpf --pid` names it. {d['trials']} tasks of each cause in {d['runs']} runs (each a fresh attach), "
          f"kernel {d['kernel']}. Named: the largest slice (for mmap_lock the kernel_lock slice, for fsync the fsync's own io "
          "slice: the step's spin and writes may queue or sleep longer) is of the planted kind, every identity the README "
          "promises for it matches what the app planted, and its time is within 10 % of the app's measure.",
          term=True)
    _cause_table(doc, d["rows"])


def lane_causes(doc, d):
    doc.p(f"The kernel lane's `causes` scenario with LANE_CAUSE_TRIALS={d['trials']}: one boot per arch, "
          "jankbpf system-wide, `cause_target` planting each cause that many times (the quota in a cgroup2 "
          "`cpu.max` of 20000/100000). Judged as section 11, except the fault's truth: the thread's time "
          "blocked (D) over its jank in the guest's own sched trace (ftrace, stamped at the tracepoints jankbpf "
          "uses, by other code), where the row stored one (`truth_source`); the app's wall less CPU and run delay "
          "counts as asleep what the scheduler's clock updates lag the tracepoints under TCG.", term=True)
    for arch, a in d["arches"].items():
        if "rows" not in a:
            doc.p(f"{arch}: not run ({a.get('error')}).", term=True)
            continue
        doc.p(f"{arch}: {a['kernel']}, hooks `{a['hooks']}`, guest health {a['health']}.", term=True)
        _cause_table(doc, a["rows"])


def curve(doc, d):
    doc.p(f"`bench/fleet N` forks N idle epoll loops (`fleet_w`), watched by `jankbpf --comm fleet_w "
          "--record-rate 0 --record-rate-uid 0` (stacks on, its defaults otherwise). Per N: the first "
          f"{d['sizes'][0]['settle']['secs']} s after the attach (its start and the JVM looks), then "
          f"{d['secs']} s idle and {d['secs']} s at 10 janks a second (5 for one process; a jank: 160 ms in nanosleep); CPU is "
          "jankbpf's threads (schedstat) and its BPF programs' run time (bpf_stats), as % of one CPU; "
          "kernel map memory is the memlock of every map it holds.", term=True)
    rows, negative = [], False
    for r in d["sizes"]:
        pct = lambda w: (w["jankbpf_cpu_ns"] + w["bpf_ns"]) / (w["secs"] * 1e9) * 100  # noqa: E731
        negative = negative or any(min(w["bpf_ns"], w["jankbpf_cpu_ns"]) < 0
                                   for w in [r["settle"], r["idle"], *r["rates"].values()])
        ten = next(iter(r["rates"].values()))
        rows.append([f"{r['processes']:,}", f"{r['map_bytes'] / 2**20:.1f}", f"{r['rss_kb'] / 1024:.1f}",
                     f"{r['hwm_kb'] / 1024:.1f}" if r.get("hwm_kb") else "",
                     fmt(pct(r["settle"]), ".2f"), fmt(pct(r["idle"]), ".2f"),
                     f"{fmt(pct(ten), '.2f')} ({ten['janks']} of {ten['asked']} janks)",
                     ", ".join(f"{k} {v}" for k, v in r["lost"].items()) or "none"])
    doc.table(["watched processes", "map memory MiB", "RSS MiB", "peak RSS MiB", f"first {d['sizes'][0]['settle']['secs']} s, % CPU",
               "idle, % CPU", "10 janks/s, % CPU", "counted as not done"], rows)
    if negative:
        doc.p("A negative figure is of data stored before the windows counted per thread and per program: "
              "each was a difference of sums over the threads and programs jankbpf held at each read, and a "
              "thread that exited in between took its CPU out of the later one. Such a window's CPU is not "
              "known.", term=True)
    pj = d["per_jank"]
    doc.table(["janks a second (100 processes)", "janks reported / asked", "jankbpf µs per jank",
               "BPF µs per jank"],
              [[rate, f"{w['janks']} / {w['asked']}",
                fmt(w["jankbpf_cpu_ns"] / w["janks"] / 1000 if w["janks"] else None, ".0f"),
                fmt(w["bpf_ns"] / w["janks"] / 1000 if w["janks"] else None, ".1f")]
               for rate, w in pj["rates"].items()])
