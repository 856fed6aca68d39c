"""What sections 6b to 9 and Fuzzing of RESULTS.md show of their stored
data, and the Notes that close it."""
from __future__ import annotations

from .goals import FUZZ_INTERRUPTED_EXIT, fuzz_crashes, fuzz_interrupted, soak_lost
from .stats import fmt, frame_costs, lane_ratio, reach_share


def lane_tax(doc, d):
    doc.p(f"Kernel `{d.get('kernel')}`, guest health: {d.get('health')}. ns per getppid() of a process that "
          f"never waits; best of {d.get('reps', 5)} × {d.get('calls', 200000):,} calls; jankbpf attached "
          "system-wide with the timer watchdog; one boot, "
          + ("A B A B A B A per hook kind (each round's B against the A on either side; the table shows "
             "the median round, the last column every round's ratio)"
             if any(r.get("rounds") for r in d.get("kinds", {}).values()) else "A B A per hook kind")
          + ". Emulated (TCG) nanoseconds are not native ones: the ratios are the figure.")
    f = lambda x: f"{x:.0f}" if x else "n/a"  # noqa: E731
    rounds = lambda r: ", ".join(fmt(lane_ratio(x), ".3f") for x in r.get("rounds", [])) or "n/a"  # noqa: E731
    doc.table(["waits hooked by", "without", "with jankbpf", "after", "ratio (with / mean without)",
               "hooks the summary reports", "every round"],
              [[kind, f(r["before"]), f(r["during"]), f(r["after"]), fmt(lane_ratio(r), ".3f") + "×",
                r["hooks_used"] or "n/a", rounds(r)] for kind, r in d.get("kinds", {}).items()])
    loops = [(kind, loop, x) for kind, r in d.get("kinds", {}).items() for loop, x in r.get("loops", {}).items()]
    if loops:
        doc.p("The cause hooks' tax the same way (bench/taxbench.c): ns per minor page fault (`fault`), per "
              "futex hand-off between two threads (`futex`), per O_DIRECT 4 KiB read of a null_blk blk-mq "
              "device (`blockio`); goal ≤ 1.05× (issue 27).")
        doc.table(["waits hooked by", "loop", "without", "with jankbpf", "after", "ratio", "every round"],
                  [[kind, loop, f(x["before"]), f(x["during"]), f(x["after"]), fmt(lane_ratio(x), ".3f") + "×",
                    rounds(x)] for kind, loop, x in loops])
    stats = [(kind, loop, r, x) for kind, r in d.get("kinds", {}).items()
             for loop, x in r.get("stats", {}).items()]
    if stats:
        doc.p("Where the tax goes: one more attach per hook kind with `kernel.bpf_stats_enabled=1`, each loop "
              "run once between two snapshots of jankbpf's programs (`bpftool prog show`): which programs ran, machine-wide, "
              "per operation of the loop, and the kernel's run time per run. That run time includes bpf_stats' own two "
              "clock reads, dear under TCG, so it overstates a program that returns at once; the tax per "
              "program run (the measured tax over the runs per operation) is what each run costs the "
              "operation, its dispatch included.")
        rows = []
        for kind, loop, r, x in stats:
            timed = r if loop == "getppid" else r.get("loops", {}).get(loop, {})
            base = [v for v in (timed.get("before"), timed.get("after")) if v]
            tax = timed["during"] - sum(base) / len(base) if base and timed.get("during") else None
            runs = x["runs_per_op"]
            progs = ", ".join(f"{n} {p['runs_per_op']:.2f}" for n, p in
                              sorted(x["programs"].items(), key=lambda kv: -kv[1]["runs_per_op"])[:4]) or "none"
            rows.append([kind, loop, f"{runs:.2f}", progs, fmt(x["ns_per_op"] / runs if runs else None, ".0f"),
                         fmt(tax, ".0f"), fmt(tax / runs if tax is not None and runs >= 0.5 else None, ".0f")])
        doc.table(["waits hooked by", "loop", "program runs per op", "programs (runs per op)",
                   "ns per run (bpf_stats)", "tax ns per op", "tax ns per program run"], rows)


def lane_idle(doc, d):
    doc.p(f"Kernel `{d.get('kernel')}`, guest health: {d.get('health')}; hooks {', '.join(d.get('hooks', [])) or 'n/a'}. "
          f"jank_target once per event-loop wait, idle in it (`--start-on-signal`) before jankbpf starts; "
          f"{d.get('trials')} attaches of `jankbpf --pid ...` ({d.get('attached')} attached), after each one "
          "SIGUSR2 starts one 250 ms spin per target: is that first task a jank of its wait, and how far is "
          "its length from the app's own clock (ms, kernel minus app; TCG)?")
    rows = []
    for wait, r in d.get("waits", {}).items():
        e = sorted(r["errors_ms"])
        rows.append([wait, f"{r['reported']} of {r['trials']}", str(r["begin_at_switch_in"]),
                     f"{e[0]:+.2f}" if e else "n/a", f"{e[len(e) // 2]:+.2f}" if e else "n/a",
                     f"{e[-1]:+.2f}" if e else "n/a"])
    doc.table(["wait", "first task reported", "begun at the switch-in", "error min", "median", "max"], rows)


def stacks(doc, d):
    doc.p(f"jankbpf's stack options: {', '.join('`' + o + '`' for o in d['options'])}; "
          "everything below runs with their defaults.")
    items = []
    if "unit" in d:
        u = d["unit"]
        items.append(f"The stack library alone (`build/jankbpf-unit \"[stack-bench]\"`: unwind + symbolize of "
                     f"16 KB perf samples of `stack_target deep`, -O2 -fomit-frame-pointer, {u['frames']} frames): "
                     f"cold first sample {u['cold_ms']:.1f} ms; warm p50 {u['p50_us']:.1f} µs, p99 "
                     f"{u['p99_us']:.1f} µs, max {u['max_us']:.0f} µs — about {1e6 / u['p50_us']:,.0f} "
                     "samples/s on one core.")
    else:
        items.append(f"Stack library bench: not run ({d.get('unit_error', '?')}).")
    for key, what in (("jankbpf", "defaults: stacks and traces"),
                      ("jankbpf_stacks_only", "`--log-type 1`: stacks only")):
        x = d[key]
        per = (x["cpu_ms"] / x["log_samples"]) if x["log_samples"] else float("nan")
        cmd = " ".join(["jankbpf --pid PID --ignore-startup-time 3", *x["args"]])
        items.append(
            f"jankbpf end to end ({what}), `{cmd}` on one {x['task_ms']:.0f} ms spin task of jank_target "
            f"(-O2, no frame pointers, nice -20): {x['samples']} on-CPU samples, {x['offcpu']} off-CPU "
            f"captures, {x['lost']} lost, {x['dropped']} dropped, {x['traces']} traces; {x['logs']} stack "
            f"log(s) of {x['log_bytes']:,} bytes: **{reach_share(x, 'to_main')} reach main**. jankbpf's CPU from task start to record: {x['cpu_ms']:.0f} ms of its own "
            f"(≈ {per:.1f} ms per sample) + {x['child_ms']:.0f} ms of its children (trace-cmd); the jank "
            f"record arrived {fmt(x['arrival_ms'])} ms after the task ended. heaviest_stack: "
            f"`{x['heaviest'][:400]}`")
    bu = d["bpftrace_ustack"]
    share = fmt(bu["to_main"] / bu["samples"] * 100 if bu["samples"] else None, ".0f")
    items.append(f"bpftrace `ustack` (frame pointers) at 199 Hz on the same task at the same time: "
                 f"{bu['to_main']} of {bu['samples']} samples reach `main` ({share}%). "
                 f"Command: `{d['bpftrace_argv']}`.")
    w = d.get("warm")
    if w:
        items.append(f"Warm (issue 12): `{w['target_argv']}` watched by `jankbpf --pid PID "
                     f"--ignore-startup-time 3`; the first task warms jankbpf's caches of the target "
                     f"(a sleep, so its off-CPU capture loads kallsyms too), then {w['janks'] - 1} spins: {w['warm_samples']} samples, {w['warm_cpu_ms']:.1f} ms of "
                     f"jankbpf's own CPU (schedstat, all its threads) from the first record's arrival to the "
                     f"last's: **{fmt(w['us_per_sample'], '.1f')} µs per sample**; {w['lost']} lost.")
    doc.bullets(items, term=True)


def _reader(doc, d, what: str, found: str, reads: str) -> bool:
    if "p50_us" not in d:
        doc.p(f"Not run ({d.get('error', '?')}).", term=True)
        return False
    doc.p(f"{what}, process_vm_readv: {found} in {d['find_ms']:.1f} ms (once per process); cold first read "
          f"{d['cold_us']:.0f} µs; warm p50 {d['p50_us']:.1f} µs, p99 {d['p99_us']:.0f} µs, max "
          f"{d['max_us']:.0f} µs; {d['reads']:.0f} reads per capture {reads}.", term=True)
    return True


def python(doc, d):
    _reader(doc, d, f"`build/jankbpf-unit \"[python-bench]\"`: the ring thread's read of one sample's frames, "
            f"{d.get('python')} spinning {d.get('frames')} Python frames deep", "runtime found",
            f"({d['p50_us'] / d['frames']:.1f} µs per frame)" if "p50_us" in d else "")


def v8(doc, d):
    _reader(doc, d, f"`build/jankbpf-unit \"[v8-bench]\"`: the ring thread's read of one sample's JavaScript "
            f"frames, {d.get('node')} (no flags) spinning {d.get('frames')} JS frames deep",
            "V8's constants found (node's .dynsym is 1.8 MB)",
            "(all frames' functions, then all their shared infos, each one batched call)")


def node(doc, d):
    if "error" in d:
        doc.p(f"Not run ({d['error']}).", term=True)
        return
    parts = [f"{k} jank: jankbpf CPU {d[k]['cpu_ms']:.0f} ms, record {d[k]['arrival_ms']:.0f} ms after the "
             f"task ended, heaviest_stack `{d[k]['heaviest'][:160]}`" for k in ("first", "second") if k in d]
    doc.p("A large binary with JIT frames, cold then warm: `node -e` running 600 ms of JavaScript per jank, "
          f"two janks; {d['samples']} samples; " + "; ".join(parts)
          + f"; stack logs: {d['logs']}, {reach_share(d, 'to_main')} reach main "
          f"(`__libc_start_call_main`: node's main is inlined into it)"
          + (f"; JavaScript frames named with no flag: {', '.join('`' + x + '`' for x in d['js_named'])}, "
             f"runnable_name `{d.get('first', {}).get('runnable_name', '')}`; summary runtime_frames "
             f"{d['runtime_frames']}" if "js_named" in d else "") + ".", term=True)


def soak(doc, d):
    s = d["summary"]
    per_jank_ms = 1000 * d["cpu_s"] / d["janks"] if d["janks"] else float("nan")
    doc.p(f"{d['minutes']:.1f} minutes. {d['processes']} jank_targets ({d['task_ms']} ms tasks every "
          f"{d['period_s']:.0f} s each, a third each spin, sleep and 1 ms naps), `--threshold {d['threshold_ms']}`, "
          f"default stacks and off-CPU captures, `--pid` ×{d['processes']}; RSS read every 5 s, warm-up the "
          f"first {d['warm_s']:.0f} s. Its goals are in the Goals table (issue 10).")
    lost = soak_lost(d)
    doc.table(["figure", "value"], [
        ["janks (with stacks / with off-CPU captures)", f"{d['janks']} of {d['expected']} "
         f"({d['stacks']} / {d['off_cpu']})"],
        ["RSS at warm-up end / max after / at the end", f"{d['rss_warm_kb'] / 1024:.1f} / "
         f"{d['rss_max_kb'] / 1024:.1f} / {d['rss_end_kb'] / 1024:.1f} MB"],
        ["RSS by minute", ", ".join(f"{t / 60:.0f} min {kb / 1024:.0f} MB" for t, kb in d["rss_by_minute"])],
        ["lost", ", ".join(f"{k} {v}" for k, v in lost.items())],
        ["jankbpf CPU in all", f"{d['cpu_s']:.1f} s ({100 * d['cpu_s'] / (60 * d['minutes']):.2f} % of one CPU)"],
        ["jankbpf CPU per jank", f"{per_jank_ms:.2f} ms"],
        ["samples / stack logs / suppressed", f"{s.get('samples', 0)} / {s.get('stack_logs', 0)} / "
         f"{s.get('suppressed', 0)}"],
        ["off-CPU captures / rate-limited", f"{s.get('offcpu_captures', 0)} / {s.get('offcpu_rate_limited', 0)}"],
        ["exit", f"{d['rc']}" + ("" if d["rc"] == 0 and s else " — " + " | ".join(d["stderr_tail"]))],
    ])


def _fuzz_ran(r) -> str:
    runs = r.get("runs") or []
    said = "; ".join(f"{x['commit'][:7]} {str(x.get('date', ''))[:10]} ({x['executions']:,}"
                     + (f", {x['workers']} processes" if x.get("workers", 1) > 1 else "")
                     + (f", {x['starved']} timeouts starved" if x.get("starved") else "") + ")" for x in runs) or "—"
    checked = (r.get("checked") or {}).get("commit")
    if checked and (not runs or runs[-1]["commit"] != checked):
        said += f"; same binary at {checked[:7]}"
    return said


def fuzz(doc, d):
    doc.p(f"Each libFuzzer target of the Makefile (tests/fuzz/, ASan+UBSan, clang {d['clang']}, built by "
          f"`make fuzz-bin`) to {d['runs']:,} executions, {d.get('jobs', 1)} target(s) at a time"
          + (f" (this run: fewer targets than that, so each as {d['workers']} libFuzzer processes on its one "
             "corpus, its executions and exec/s their sum)" if d.get("workers", 1) > 1 else "")
          + ", from its "
          "seeds and the corpus kept in build/fuzz/corpus/, after one pass over the generated large inputs; "
          f"{d['cpus']} CPUs shared with the rest of the bench host. scripts/fuzz.sh exit status {d['rc']}. "
          "A row is one binary's (build-id: its GNU build-id): a run keeps a row whose binary this tree builds "
          "again byte for byte (same sha256), resumes one cut short on it, and runs the rest; 'ran' lists each "
          "run's commit, date and executions. A row is fresh while no later commit changes a file its objects "
          "were compiled from (their make dependency files) and the compiler flags stay the same.")
    if "kept" in d:
        doc.p(f"This run: kept {', '.join(d['kept']) or 'none'}; ran {', '.join(d['ran']) or 'none'}.")
    if not d["targets"]:
        doc.p("(no rows: scripts/fuzz.sh failed before running a target)", term=True)
        return
    doc.table(["target", "executions", "seconds", "exec/s", "crashes", "exit", "corpus", "build-id", "ran"],
              [[r["target"], f"{r['executions']:,}", f"{r['seconds']:,.0f}", f"{r['exec_per_s']:,}",
                fuzz_crashes(r), f"{r['rc']} (stopped by a signal)" if fuzz_interrupted(r) else r["rc"],
                f"{r['corpus_files']} files, {r['corpus_kb']} KB", r.get("build_id", "")[:16] or "—",
                _fuzz_ran(r)]
               for r in d["targets"]], align="lrrrrrlll")
    for r in d["targets"]:
        if r.get("identity"):
            doc.p(f"{r['target']}'s build-id: {r['identity']}.", term=True)
    if any(x.get("starved") for r in d["targets"] for x in r.get("runs") or []):
        doc.p("'timeouts starved': libFuzzer's -timeout is wall time, and a unit that timed out while the host was "
              "busier than its CPUs finished within it when run again alone (scripts/fuzz.sh replay_timeouts): "
              "not a finding; the worker it stopped did not reach its share of the executions.", term=True)
    if any(fuzz_interrupted(r) for r in d["targets"]):
        doc.p(f"Exit {FUZZ_INTERRUPTED_EXIT} is libFuzzer's when a signal stops it (`-interrupted_exitcode`): "
              "the run was cut short there, with no input saved as a finding; its executions are the ones it "
              "reached, short of the goal's.", term=True)


NOTES = [
    "This is a shared VM: other work runs beside the bench, so throughput moves ±10–15% run to run; "
    "each section's load average is in its measured line.",
    "`bench/jank.bt` hooks only the 14 wait-syscall tracepoints; jankbpf also hooks sched_switch, "
    "sched_wakeup, sched_wakeup_new and sched_process_exit (thread-state split, watchdog, exits), "
    "so on wakeup-heavy loads it runs more programs per request by design. The per-hook table "
    "shows where its time goes.",
    "bpf_stats count only the time inside each program. What the hooks cost around it — every "
    "syscall of every task taking the traced slow path once a syscall tracepoint is enabled "
    "(section 6), the perf-event dispatch of each syscall tracepoint, the tp_btf entry of the "
    "scheduler hooks — is not in run_time_ns, so the server's CPU per request (section 1) can rise "
    "by more than the BPF share (section 2); the difference is that overhead.",
    "BCC needs kernel headers to compile; where the running kernel ships none (this VM), "
    "scripts/bench.sh merges Debian's linux-headers-amd64 (a different kernel version; the tool "
    "only touches tracepoint args) into a temporary tree and points BCC_KERNEL_SOURCE at it.",
    "The workloads (redis-server and redis-benchmark, both ping-pong processes, the getppid loop) "
    "are pinned to the last CPU with taskset, at nice -20: each request then costs what its path costs on that "
    "CPU. Unpinned, this VM's idle virtual CPUs (no guest halt-polling) take up to a millisecond to "
    "wake, and throughput swung 10x between identical runs. Pinned client and server on one CPU "
    "also means redis serves several clients per epoll_wait; the per-request hook counts in "
    "section 2 say how many programs ran per request.",
    "Every jankbpf run in the bench writes its stack/trace logs to a temporary `--log-dir` "
    "(removed at the end), so no run inherits another's report quota and nothing is left in "
    "/var/log/jankbpf.",
    "Redis request counts are calibrated at the start for about 1.2 s per run (0.7 s quick); jankbpf "
    "ignores a process's first 10 s, so the servers are started early and are older than that before "
    "any throughput run.",
]


def frames(doc, d):
    c = frame_costs(d)
    doc.p(f"`{d['client']}` under `jankbpf --comm wl_frames --ignore-startup-time 3`, `--frames off` and `on` "
          f"alternating, {d['rounds']} round(s) of each. The client's CPU (CLOCK_PROCESS_CPUTIME_ID over its "
          "counted frames: the uprobes' traps are charged to it) and jankbpf's (schedstat, every thread, over "
          "the same frames), per frame; the difference of each side's best (least) round is what frames cost "
          "(other sessions' load only adds CPU time).")
    rows = []
    for mode in ("off", "on"):
        for i, r in enumerate(d["runs"][mode]):
            rows.append([f"--frames {mode} #{i + 1}", r["frames"], r["frames_seen"],
                         fmt(r["client_cpu_ns"] / r["frames"] / 1000), fmt(r["jankbpf_cpu_ns"] / r["frames"] / 1000),
                         fmt(r["frames"] / (r["wall_ns"] / 1e9))])
    doc.table(["run", "client frames", "frames jankbpf counted", "client µs/frame", "jankbpf µs/frame", "frames/s"],
              rows)
    doc.p(f"**Cost per frame: {c['frame_ns'] / 1000:.1f} µs** ({c['client_ns'] / 1000:.1f} µs in the client: "
          f"traps and BPF; {c['jankbpf_ns'] / 1000:.1f} µs in jankbpf); **a 60 Hz client: "
          f"{c['pct_60hz']:.2f}% of one CPU**.", term=True)
    st = d.get("stats", {})
    bpf = st.get("bpf", {})
    if bpf:
        n = st["frames"]
        doc.table(["frame program (bpf_stats run)", "hits per frame", "average ns"],
                  [[name, fmt(v["run_cnt"] / n, ".1f"), fmt(v["run_time_ns"] / v["run_cnt"] if v["run_cnt"] else None, ".0f")]
                   for name, v in sorted(bpf.items())])
