"""RESULTS.md and the terminal summary, from every stored result: a Runs
table (what was measured when, on which commit and machine), the Goals
table, then each section with its own measured line."""
from __future__ import annotations

from . import goals as goals_mod
from . import sections as s1
from . import sections_java as s3
from . import sections_more as s2
from .render import Doc, markdown, terminal

# (scenario, heading, renderer); in reading order, not run order.
SECTIONS = [
    ("throughput", "1. Throughput", s1.throughput),
    ("where", "1b. Where the throughput goes (perf record -a, cpu-clock)", s1.where),
    ("hooks", "2. Per-hook cost (bpf_stats)", s1.hooks),
    ("startup", "3. Startup: exec → attached", s1.startup),
    ("footprint", "4. jankbpf's footprint", s1.footprint),
    ("accuracy", "5. Accuracy and latency", s1.accuracy),
    ("tax", "6. Syscall tax on an unwatched process", s1.tax),
    ("lane_tax", "6b. Syscall tax on Debian 12's 6.1 x86_64 kernel (kernel lane, qemu TCG)", s2.lane_tax),
    ("lane_idle", "6c. First task after an attach to idle threads (kernel lane, 6.1 x86_64, trampolines)",
     s2.lane_idle),
    ("stacks", "7. Stacks", s2.stacks),
    ("python", "7b. Stacks: the Python frame reader", s2.python),
    ("v8", "7c. Stacks: the JavaScript frame reader", s2.v8),
    ("node", "7d. Stacks: node, cold then warm", s2.node),
    ("hotspot", "7e. Stacks: the Java frame reader", s3.hotspot),
    ("jvm", "7f. Stacks: a JVM's loop threads, no flags", s3.jvm),
    ("soak", "9. Soak: 20 processes, 10 janks a second, stacks on (issue 10)", s2.soak),
    ("frames", "10. Frames of Wayland clients (issue 28)", s2.frames),
    ("causes", "11. Causes: each planted cause, 20 trials (issue 27)", s3.causes),
    ("lane_causes", "11b. Causes on Debian 12's 6.1 kernels (kernel lane, qemu TCG)", s3.lane_causes),
    ("curve", "12. The cost curve: 1 to 10,000 watched processes (issue 30)", s3.curve),
    ("fuzz", "Fuzzing", s2.fuzz),
]


def _machine(m: dict) -> str:
    if not m:
        return ""
    return (f"kernel {m.get('kernel')}, {m.get('os')}; {m.get('cpu')}, {m.get('cores')} cores, "
            f"{m.get('mem_gib', 0):.0f} GiB; {m.get('jankbpf')}, bpftrace {str(m.get('bpftrace')).replace('bpftrace ', '')}, "
            f"{m.get('redis')}, BCC {m.get('bcc')}")


def _run_kind(p: dict) -> str:
    if p.get("how"):
        return "by hand"
    if p.get("quick"):
        return "BENCH_QUICK=1 smoke run"
    # Some scenarios measured again (BENCH_ONLY / BENCH_SKIP): one commit,
    # but not the full run of every scenario that the word would claim.
    cmd = p.get("command") or ""
    if any(k in cmd for k in ("BENCH_ONLY=", "BENCH_SKIP=", "--only", "--skip")):
        return "selected scenarios"
    return "full run"


def _build(p: dict) -> str:
    """The measured build as the Runs table and measured lines name it."""
    b = p.get("build") or {}
    text = f"`{p.get('describe') or p.get('commit')}`"
    if b.get("build_id"):
        text += f" (jankbpf build-id {b['build_id'][:12]})"
    elif (p.get("machine") or {}).get("jankbpf") and not p.get("how"):
        text += f" ({p['machine']['jankbpf']}; the binary was not recorded)"
    return text


def measured_line(entry: dict, stale: str | None = None) -> str:
    p = entry.get("provenance", {})
    parts = [f"Measured {p.get('date', '?')}"]
    if (p.get("describe") or p.get("commit")) and not p.get("how"):
        parts.append(f"on {_build(p)}")
    elif p.get("commit"):
        parts.append(f"at `{p['commit']}`")
    parts.append(f"({_run_kind(p)})")
    if p.get("how"):
        parts.append(p["how"])
    elif p.get("command"):
        parts.append(f"by `{p['command']}`")
    line = " ".join(parts)
    m = p.get("machine") or {}
    if m.get("kernel"):
        line += f"; kernel {m['kernel']}, {m.get('cores')} cores"
    if p.get("load"):
        line += f"; load average {p['load'][0]} → {p['load'][1]}"
    if "markdown" in entry:
        line += "; stored text, kept until a run replaces it"
    line = f"_{line}._"
    if stale:
        line += f" **Stale**: {stale}; its figures are of that build, and its goals are not judged."
    return line


def runs_table(results: dict, stale) -> list[list[str]]:
    groups: dict[tuple, list[str]] = {}
    for name, _, _ in SECTIONS:
        e = results.get(name)
        if not e:
            continue
        p = e.get("provenance", {})
        key = (p.get("date", "?")[:10], _build(p) if p.get("describe") or p.get("commit") else "—",
               _run_kind(p), p.get("how") or f"`{p.get('command', '?')}`", _machine(p.get("machine") or {}))
        groups.setdefault(key, []).append(name + (" (stale)" if stale(name, e) else ""))
    return [[*k[:4], ", ".join(v), k[4] or "—"] for k, v in sorted(groups.items())]


def code_line(results: dict, stale) -> str:
    """Whether the runs, whatever their commits, measured the code as it is."""
    names = [n for n, _, _ in SECTIONS if results.get(n) and "markdown" not in results[n]]
    old = [n for n in names if stale(n, results[n])]
    commits = sorted({results[n].get("provenance", {}).get("commit", "?") for n in names if n not in old})
    line = (f"{len(names) - len(old)} of {len(names)} measured sections are of the code as it is in this checkout "
            f"(no later commit touches what they measure)")
    if commits:
        line += f", on {len(commits)} commit(s): {', '.join(commits)}"
    return line + (f"; stale: {', '.join(old)}." if old else ".")


def document(results: dict, title_note: str = "", stale=None) -> tuple[Doc, list[dict]]:
    stale = stale or goals_mod.checkout_staleness()
    doc = Doc()
    doc.h("jankbpf benchmark results", 1)
    doc.p("Rendered by `bench/jankbench` from the stored results in `bench/results/` (one JSON file per "
          "scenario, with when, on which build and how it was measured). `sudo make bench` builds jankbpf "
          "from the tree and measures everything on one commit (it refuses a tree with uncommitted changes); "
          "`sudo make bench BENCH_ONLY=tax,hooks` measures some scenarios again and renders everything; "
          "`BENCH_QUICK=1` is a smoke run, stored apart (build/bench/). Each section says when and on which "
          "build it was measured; a section whose build is older than the code it measures (a later commit "
          "changes src/, bpf/ or include/, src/report/ aside, which no scenario runs; for each fuzz target, the files its binary "
          "was compiled from) is **stale**: its figures stay, its "
          "goals are not judged. A verdict is met only when every part of the goal's bound holds; **error** "
          "is data that says it is not healthy, or a judge that failed on it."
          + (" " + title_note if title_note else ""))
    doc.h("Runs", term=False)
    doc.table(["measured (UTC)", "build", "run", "how", "sections", "machine"], runs_table(results, stale),
              term=False)
    doc.p(code_line(results, stale), term=True)
    rows = goals_mod.evaluate(results, stale=stale)
    doc.h("Goals")
    doc.table(["goal", "issue", "measured", "verdict"],
              [[r["goal"], r["issue"], r["figure"], r["verdict"]] for r in rows], term=False)
    doc.bullets([f"[{r['verdict'].strip('*')}] {r['goal']} (issue {r['issue']}): {r['figure']}" for r in rows],
                term=True, md=False)
    for name, title, fn in SECTIONS:
        e = results.get(name)
        if not e:
            continue
        frag = "markdown" in e
        doc.h(e.get("title") or title)
        doc.p(measured_line(e, stale(name, e)), term=True)
        if frag:
            doc.md(e["markdown"], note="(stored text: see RESULTS.md)")
        else:
            fn(doc, e["data"])
        cmds = e.get("commands") or (e.get("data") or {}).get("commands")
        if cmds:
            doc.p("Commands, as run (PORT: a free loopback port; PID: the target's):")
            doc.code(cmds)
    doc.h("Notes", term=False)
    doc.bullets(s2.NOTES)
    return doc, rows


def render(results: dict, title_note: str = "", stale=None) -> tuple[str, str, list[dict]]:
    """(RESULTS.md text, terminal text, goal rows). `stale(name, entry)`:
    why a stored entry no longer measures the checkout's code, or None
    (default: this git checkout's answer)."""
    doc, rows = document(results, title_note, stale)
    return markdown(doc), terminal(doc), rows
