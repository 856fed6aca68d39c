"""What sections 1 to 6 of RESULTS.md show of their stored data. Each
function adds blocks to a Doc (render.py); the text says how the figures
were measured, with the run's own sizes (rounds, calls) from the data."""
from __future__ import annotations

from .stats import (avg_hook_ns, bpf_share, median, ratios, spread, where_added, where_per_request,
                    where_server_added, where_symbols_added)

LABEL = {"none": "nothing", "jankbpf": "jankbpf", "jankbpf-nostacks": "jankbpf --log-type 2",
         "jankbpf-flight": "jankbpf --trace-recorder always",
         "bpftrace": "bpftrace jank.bt", "floor": "bpftrace floor.bt (the floor)"}


def throughput(doc, d):
    cfgs = d["configs"][1:]
    data = d["data"]
    flight = "jankbpf-flight" in d["configs"]
    doc.p(f"{d['rounds']} rounds; each round runs every workload with nothing attached (A), with `jankbpf` "
          "watching every process (B, its defaults: stacks and traces on), with `jankbpf --log-type 2` "
          "(C, no stacks) and with `bench/jank.bt` (D)" +
          (", and with `jankbpf --trace-recorder always` (E: its ftrace instance recording all along, as "
           "before the on-demand recorder), in that order (A B C D E A B C D E …)" if flight else
           ", in that order (A B C D A B C D …)") + ". Ratios are to "
          "the same round's baseline: median [min–max] over rounds. CPU is the server's own on-CPU time "
          "per request (schedstat, all its threads; for ping-pong both processes per round trip), hooks "
          "included: the figure that holds still when throughput does not.")
    rows = []
    for w in d["workloads"]:
        n = w["name"]
        base = median([x["rate"] for x in data["none"][n]])
        bcpu = median([x["cpu_us"] for x in data["none"][n]])
        rows.append([n, f"{base:,.0f}", *[spread(ratios(d, c, n, "rate")) for c in cfgs], f"{bcpu:.2f}",
                     *[spread(ratios(d, c, n, "cpu_us")) for c in cfgs]])
    doc.table(["workload", "baseline rate/s", *[f"{LABEL[c]} rate" for c in cfgs], "baseline CPU µs/req",
               *[f"{LABEL[c]} CPU" for c in cfgs]], rows)
    doc.p("Baseline spread (max/min of the baseline runs, the noise floor): " + ", ".join(
        f"{w['name']} {max(x['rate'] for x in data['none'][w['name']]) / min(x['rate'] for x in data['none'][w['name']]):.2f}"
        for w in d["workloads"]) + ".", term=True)
    contaminated = {c: sum(1 for w in d["workloads"] for x in data[c][w["name"]] if x.get("foreign"))
                    for c in d["configs"]}
    nruns = sum(len(data["none"][w["name"]]) for w in d["workloads"])
    doc.p("Runs during which someone else's BPF tracing programs were loaded (another session's "
          "jankbpf or tracer on this shared machine taxes every configuration alike, the baseline "
          "included): " + ", ".join(f"{LABEL[c]} {contaminated[c]} of {nruns}" for c in d["configs"]) + ".")
    sums = d["jankbpf_summaries"]
    doc.p(f"jankbpf's summaries over these rounds: {sum(s.get('lost_events', 0) for s in sums)} lost events; "
          "tasks checked per round " + ", ".join(str(s.get("tasks_checked")) for s in sums)
          + "; off-CPU captures " + ", ".join(str(s.get("offcpu_captures")) for s in sums) + ".")


def where(doc, d):
    doc.p(f"Where section 1's lost throughput goes. {d['rounds']} rounds; in each, one run of each workload "
          "with nothing attached, with jankbpf (defaults) and with bench/jank.bt, while `perf record -a` "
          f"samples both CPUs on the cpu-clock every {d['period_ns'] / 1e3:.0f} µs of CPU. A sample counts "
          "when it falls inside the workload's own run; it is put in one bucket by who ran and, for the "
          "server (redis-server; both ping-pong processes), by the leaf function it was in (kernel "
          "symbols by name, bench/jankbench/scenarios/where.py lists the patterns). The cpu-clock is a timer "
          "interrupt, so a sample due while interrupts are off lands where they come back on: the "
          "sched_switch and wakeup hooks run with interrupts off, and their time shows in the "
          "interrupts-off bucket, not under BPF programs. Figures are CPU µs per "
          "request (round trip for ping-pong): the baseline's, then what each tool adds to it (median over "
          "rounds of tool minus the same round's baseline). Hardware counters here: "
          f"{d['hardware_counters']} — so cache misses cannot be counted on this VM, and a tool's cost in "
          "the server's own code (user space, other kernel) is where its cache and TLB pollution shows.")
    tools = [c for c in d["configs"] if c != "none"]
    keys = d["server_kinds"] + d["others"]
    for w in d["workloads"]:
        base = where_per_request(d, "none", w)
        rows = []
        for k in keys:
            b = median([r.get(k, 0.0) for r in base])
            added = [where_added(d, c, w, k) for c in tools]
            if b < 0.005 and all(abs(a) < 0.005 for a in added):
                continue
            who = "server: " + k if k in d["server_kinds"] else k
            rows.append([who, f"{b:.2f}", *[f"{a:+.2f}" for a in added]])
        tot_b = median([sum(v for k, v in r.items() if k in d["server_kinds"]) for r in base])
        tot_a = [where_server_added(d, c, w) for c in tools]
        rows.append(["**server, all**", f"{tot_b:.2f}", *[f"{a:+.2f}" for a in tot_a]])
        rows.append(["server context switches per request", f"{median([r['switches'] for r in base]):.2f}",
                     *[f"{where_added(d, c, w, 'switches'):+.2f}" for c in tools]])
        doc.p(f"**{w}**, µs per request:", term=True)
        doc.table(["bucket", "nothing", *[f"{LABEL[c]} adds" for c in tools]], rows)
        grew = where_symbols_added(d, "jankbpf", w)[:8]
        if grew:
            doc.p("The server's functions whose samples grew most under jankbpf (µs per request, among each "
                  "run's 40 most sampled): " + ", ".join(f"`{k}` {v:+.2f}" for k, v in grew) + ".")
        j = {k: where_added(d, "jankbpf", w, k) for k in d["server_kinds"]}
        top = sorted(((v, k) for k, v in j.items() if v > 0), reverse=True)[:3]
        if tot_a and tot_a[0] > 0:
            doc.p(f"Of the {tot_a[0]:.2f} µs jankbpf adds to the server's CPU per request, the most: "
                  + ", ".join(f"{k} {v:.2f} ({v / tot_a[0]:.0%})" for v, k in top) + ".", term=True)


def tax(doc, d):
    cfgs = d["configs"][1:]
    doc.p(f"ns per `getppid()` in a process that never waits (so is never watched), the least disturbed of "
          f"{d['reps']} × {d['calls']:,} calls. {d['rounds']} rounds of A B A C A D A (A: nothing attached); a "
          "tool's tax is its figure minus the mean of the baselines just before and after it, since this "
          "VM's speed drifts by tens of percent over seconds.")
    doc.table(["nothing attached", *[LABEL[c] for c in cfgs], *[f"{LABEL[c]} tax" for c in cfgs]],
              [[spread(d["none"], ".1f"), *[spread(d[c], ".1f") for c in cfgs],
                *[spread(d["tax"][c], "+.1f") for c in cfgs]]])


def hooks(doc, d):
    doc.p("`kernel.bpf_stats_enabled=1` for this pass only (restored afterwards); one run of each "
          "workload per tool; run_time_ns / run_cnt of each program the tool holds open, read from "
          "its /proc/PID/fdinfo before and after each run (names from `bpftool prog show` and "
          "`bpftool perf list`). The tools watch every process: other processes' events count too. "
          "`sched_switch` is where jankbpf's stack machinery sits: with stacks on (the default) every "
          "switch-out of a watched thread inside a task saves an off-CPU stack in case the task turns "
          "long; `--log-type 2` shows the same hook without it.")
    for cfg, t in d["tools"].items():
        doc.p(f"**{LABEL[cfg]}** — per program (programs that ran):", term=True)
        rows = [[name, f"{cnt:,}", f"{ns / cnt:.0f}"]
                for name, (cnt, ns) in sorted(t["per_prog"].items(), key=lambda kv: -kv[1][1]) if cnt]
        avg, c = avg_hook_ns(d, cfg)
        rows.append(["**all**", f"{c:,}", f"**{avg:.0f}**"])
        doc.table(["program", "runs", "avg ns/run"], rows)
        if cfg == "floor":
            doc.p("The floor: `bench/floor.bt` runs empty programs on sched_switch, sched_waking and the "
                  "epoll_wait tracepoints, and on sched_wakeup a program whose only work is one clock read "
                  "(`nsecs`, bpf_ktime_get_ns). What an empty program measures is the cost of running "
                  "any program there on this machine, the kernel's own timing of the run included; the "
                  "clock read's extra cost is paid once by every jankbpf hook that measures a span "
                  "(the waits, sched_switch, sched_wakeup).")
            continue
        doc.p("Per request: BPF programs run and BPF ns spent (all of the machine's events during the run), "
              "against the CPU the request costs (server, and redis-benchmark's own; for ping-pong both "
              "processes per round trip). BPF share = BPF ns / (server + client CPU): the part of each "
              "request's CPU spent in the tool's programs, a throughput cost that does not depend on noise.")
        doc.table(["workload", "runs/request", "BPF ns/request", "server CPU µs/request",
                   "client CPU µs/request", "BPF share"],
                  [[n, f"{v['calls_per_req']:.2f}", f"{v['ns_per_req']:.0f}", f"{v['cpu_us']:.2f}",
                    f"{v['client_us']:.2f}" if n.startswith("redis") else "—", f"{bpf_share(v):.1f}%"]
                   for n, v in t["per_workload"].items()])


def startup(doc, d):
    rec = (f" Its trace recorder (the ftrace instance for tasks past 450 ms) is set up beside the BPF "
           f"load and may be ready after the attach: its `ftrace instance ... ready` line came at "
           f"{spread(d['jankbpf_recorder'], '.0f')} ms." if d.get("jankbpf_recorder") else "")
    doc.p(f"Median [min–max] of {d['reps']} runs, interleaved. jankbpf: to its `jankbpf: attached` "
          f"line on stderr.{rec} bpftrace: `bench/jank.bt` plus a sentinel probe declared last "
          "(bpftrace attaches in script order) on `sys_enter_getppid` of a trigger process that calls "
          "getppid() every 100 µs; \"Attaching N probes...\" is printed before the first attach. BCC: "
          "`bench/jank_bcc.py`, the same detection as a BCC tool (TRACEPOINT_PROBE on the same 14 "
          "tracepoints, compiled by clang at startup), to its `attached` line. Stop: "
          "SIGTERM/SIGINT to exit.")
    doc.table(["tool", "exec → attached (ms)", "stop (ms)"], [
        ["jankbpf", spread(d["jankbpf"], ".0f"), spread(d["jankbpf_stop"], ".0f")],
        *([["jankbpf --hooks raw-tracepoint", spread(d["jankbpf_raw"], ".0f"), spread(d["jankbpf_raw_stop"], ".0f")]]
          if d.get("jankbpf_raw") else []),
        ["bpftrace jank.bt", f"{spread(d['bpftrace'], '.0f')} (\"Attaching\" at "
         f"{median(d['bpftrace_attaching']):.0f})", spread(d["bpftrace_stop"], ".0f")],
        ["BCC jank_bcc.py", spread(d["bcc"], ".0f"), spread(d["bcc_stop"], ".0f")]])


def footprint(doc, d):
    doc.p("Counters of jankbpf from /proc: CPU is utime + stime with exited threads and waited-for children "
          "(trace-cmd) included, in 10 ms ticks; voluntary + involuntary "
          "context switches, VmHWM). *every process*: jankbpf with no target, its defaults (stacks and "
          "traces on), on this shared machine, where other sessions' shells and tests run; *one idle "
          "process*: `jankbpf --pid` of an idle jank_target, at the same time, which isolates jankbpf's "
          "own periodic wakeups from its reactions to other processes' janks. The janky window runs "
          "`jank_target --script sleep:170xN --gap 30` (a 170 ms task every 200 ms). *no stacks*: the "
          "same with `--log-type 2` (traces only).")
    rows = []
    for k, lbl in (("watch_idle", "one idle process, idle"), ("idle", "every process, idle"),
                   ("janky", "every process, janky"), ("nostack", "every process, janky, no stacks")):
        w = d[k]
        rows.append([f"{lbl}, {w['secs']} s", f"{w['cpu_s']:.2f}", f"{w['child_s']:.2f}",
                     f"{w['vol']}+{w['nonvol']}", w["records"], f"{w['hwm_kb'] / 1024:.1f} MB"])
    doc.table(["run, window", "CPU s", "children's CPU s (trace-cmd)", "context switches (vol+invol)",
               "records written", "peak RSS (VmHWM)"], rows)
    j, s = d["janky"], d["summary"]
    per_rec = (j["cpu_s"] + j["child_s"]) / j["records"] * 1e6 if j["records"] else float("nan")
    doc.p(f"Janky window: {j['target_janks']} jank records for the target, {per_rec:.0f} µs of jankbpf CPU "
          f"(its own and its children's) per record written; {d['logs']} log files. Summary at exit (default run): "
          + ", ".join(f"{k} {s.get(k)}" for k in ("cpu_user_s", "cpu_sys_s", "max_rss_kb", "lost_events",
                                                   "samples", "offcpu_captures", "stack_logs", "traces"))
          + f"; no-stacks run: max_rss_kb {d['nostack_summary'].get('max_rss_kb')}, traces "
          f"{d['nostack_summary'].get('traces')}. Traces are taken for tasks past the trace threshold "
          "(450 ms) of any process on the machine, so the children's CPU depends on what else runs.")
    elf = s.get("budgets", {}).get("elf_bytes_max", 0)
    doc.p(f"What the peak holds: at most {elf / 2**20:.1f} MiB of ELF sections were held at once "
          "(`budgets.elf_bytes_max`). Every other process on the machine is watched too: a process "
          "built with `-g` that janks has its symbol and DWARF sections copied (not mapped: a file "
          "changed under a mapping would crash jankbpf) and kept with its module, so the peak "
          "follows the largest binaries symbolized. Here the one jank not of the target was, by its "
          "size, jankbpf's own binary (built with `-g`; nothing else that large runs here): this "
          "scenario's `--pid` instance stopping.")


def accuracy(doc, d):
    doc.p(f"`{d['target_argv']}`, watched by "
          "`jankbpf --pid PID --ignore-startup-time 3` (its defaults otherwise: stacks, and a trace for "
          "tasks past 450 ms). Truth is the app's own CLOCK_MONOTONIC begin/end "
          "of each task; a record matches the task whose begin is within 5 ms of its "
          "`begin_monotonic_ns`. Arrival: when the bench process read the line, minus the true end. "
          "logs: the external_log files of the record.")
    doc.table(["task", "true ms", "reported ms", "error ms", "dominant state", "logs",
               "record arrives after end (ms)"],
              [[f"{r['kind']}:{r['arg']}", f"{r['true_ms']:.3f}", f"{r['reported_ms']:.3f}", f"{r['err_ms']:+.3f}",
                r["dominant"], r["logs"] or "—", f"{r['arrival_ms']:.1f}"] for r in d["rows"]], term=False)
    errs = [abs(e) for e in d["errors"]]
    worst = f"{max(errs):.3f}" if errs else "n/a"
    arr = d["arrival_ms"]
    doc.p(f"Error: median {median(errs):.3f} ms, worst {worst} ms; missed {len(d['missed'])} of "
          f"{d['n_truth_long']} (" + ", ".join(f"{x['kind']}:{x['arg']}" for x in d["missed"])
          + f"); spurious {len(d['spurious'])}; record arrival after task end: median {median(arr):.1f} ms, "
          f"worst {max(arr) if arr else float('nan'):.1f} ms.", term=True)
    h = d["hang"]
    if h:
        doc.p(f"Stuck task: the `hang` record's duration_ms is {h['kernel_late_ms']:+.3f} ms past {d['hang_ms']} ms "
              f"(the kernel's own lateness), its `time` {h['record_late_ms']:+.1f} ms and its arrival in the "
              f"bench process {h['arrival_late_ms']:+.1f} ms after task begin + {d['hang_ms']} ms; its begin is "
              f"{h['begin_err_ms']:+.3f} ms from the app's.", term=True)
    else:
        doc.p("Stuck task: **no hang record arrived**.", term=True)
