"""End-to-end tests of the pictures: --report (HTML, rendered by headless
Chromium), --perfetto (decoded by protoc against Perfetto's schema),
--folded (loaded by speedscope), live on real runs of stack_loop, Node.js
and redis-server, and after the fact with `jankbpf report`."""
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

from harness import BUILD, JANKBPF, Jankbpf, run_jankbpf
from viewers import (SPEEDSCOPE, LocalServer, dump_dom, need, pixel_counts, protoc_decode,
                     screenshot)

STACK_LOOP = os.path.join(BUILD, "tests", "stack_loop")
IGNORE = "3"
# A directory name that is markup: the exe path carries it into the report.
HOSTILE_DIR = "<img src=x onerror=document.title='pwned'>"


def flame_names(dom):
    """Function names of the flame graphs' frames in a rendered DOM."""
    return set(re.findall(r'<rect [^>]*data-name="([^"]*)"', dom))


@pytest.fixture(scope="module")
def stack_loop_run(tmp_path_factory):
    """One live run of stack_loop (from a directory whose name is markup)
    with all three outputs and a trace: spin in inner/middle/outer, block
    on a pipe until a waker thread writes."""
    d = tmp_path_factory.mktemp("report")
    bindir = d / HOSTILE_DIR
    bindir.mkdir()
    exe = bindir / "stack_loop"
    shutil.copy(STACK_LOOP, exe)
    out = {k: str(d / n) for k, n in
           (("html", "run.html"), ("pftrace", "run.pftrace"), ("folded", "run.folded"))}
    rc, records, err = run_jankbpf("--ignore-startup-time", IGNORE, "--log-type", "0", "--trace-threshold", "200",
                                   "--log-dir", str(d / "logs"), "--dev", "--report-times-per-app", "3",
                                   "--report", out["html"], "--perfetto", out["pftrace"], "--folded", out["folded"],
                                   "--", "nice", "-n", "-20", str(exe), "3.3", "deep:300", "block:250", "ab:300:100",
                                   timeout=120)
    assert rc == 0, err
    janks = [r for r in records if r["type"] == "jank"]
    assert len(janks) == 3, [(j["duration_ms"]) for j in janks]
    with open(d / "run.jsonl", "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    return {"dir": d, "records": records, "janks": janks, **out}


def test_html_report_renders_flame_graphs_in_chromium(stack_loop_run):
    url = "file://" + stack_loop_run["html"]
    dom = dump_dom(url + "#all")
    names = flame_names(dom)
    assert {"inner", "middle", "outer", "run_task", "main"} <= names, sorted(names)[:40]
    assert "wait_for_pipe" in names and "[off-CPU: sleeping]" in names, sorted(names)
    # A timeline rect per jank, a state bar per row, the waker, the logs.
    assert len(re.findall(r'class="tl-jank"', dom)) == 3
    assert 'class="statebar"' in dom
    assert "jt-waker" in dom
    for j in stack_loop_run["janks"]:
        for log in j["external_log"]:
            assert f'>{log}</a>' in dom, log
    # The exe path's markup is text, never markup: nothing ran.
    assert "<title>jankbpf report</title>" in dom
    assert not re.search(r"<img\b", dom)
    assert "&lt;img src=x onerror=" in dom
    # The top of the page (timeline, the process's flame graph): headless
    # Chromium's --screenshot paints a page scrolled by script (#jank=N
    # scrolls its row into view) as blank, depending on the row's place.
    png = screenshot(url, str(stack_loop_run["dir"] / "shot.png"), "--window-size=1000,700")
    non_white, coloured = pixel_counts(png)
    assert non_white > 0.05 * 1000 * 700 and coloured > 5000, (non_white, coloured)


def test_perfetto_trace_decodes_with_tracks_slices_callstacks_and_cpus(stack_loop_run):
    text = protoc_decode(stack_loop_run["pftrace"])
    packets = text.count("\npacket {") + text.startswith("packet {")
    print(f"pftrace: {os.path.getsize(stack_loop_run['pftrace'])} bytes, {packets} packets")
    assert re.search(r"thread \{\s+pid: \d+\s+tid: \d+\s+thread_name: \"stack_loop\"", text)
    assert text.count("type: TYPE_SLICE_BEGIN") >= 3
    assert re.search(r'name: "jank \d+\.\d ms', text)
    assert 'name: "sleeping_ms"' in text and 'name: "wait_syscall"' in text
    # Interned frames and callstacks, used by the samples.
    assert re.search(r'function_names \{\s+iid: \d+\s+str: "inner"', text)
    assert "callstacks {" in text and "frame_ids:" in text
    assert re.search(r"perf_sample \{\s+pid: \d+\s+tid: \d+\s+callstack_iid: \d+", text)
    # The block task's off-CPU period, woken by the waker thread: a flow.
    assert 'name: "off-CPU: sleeping"' in text
    assert "flow_ids:" in text and "terminating_flow_ids:" in text
    # The saved trace's scheduling events, as ftrace bundles.
    assert any(".dat" in p for j in stack_loop_run["janks"] for p in j["external_log"])
    assert "sched_switch {" in text and "next_comm:" in text and "sched_wakeup {" in text


def test_folded_stacks_root_first(stack_loop_run):
    lines = open(stack_loop_run["folded"]).read().splitlines()
    assert lines
    for line in lines:
        stack, count = line.rsplit(" ", 1)
        assert int(count) > 0
        assert stack.startswith("stack_loop (pid ")
    text = "\n".join(lines)
    assert ";main;run_task;outer;middle;inner" in text
    assert re.search(r";wait_for_pipe;.*\[off-CPU: sleeping\] \d+$", text, re.M)


def test_folded_file_loads_in_speedscope(stack_loop_run, tmp_path):
    need(os.path.exists(os.path.join(SPEEDSCOPE, "index.html")),
         "speedscope is not installed (scripts/install-test-deps.sh installs it with npm)")
    site = tmp_path / "site"
    shutil.copytree(SPEEDSCOPE, site)
    shutil.copy(stack_loop_run["folded"], site / "janks.folded")
    server = LocalServer(str(site))
    try:
        url = f"{server.url}/index.html#profileURL={server.url}/janks.folded&title=jankbpf-folded"
        gl = ["--use-angle=swiftshader", "--enable-unsafe-swiftshader"]
        dom = dump_dom(url, budget_ms=8000)
        assert "jankbpf-folded" in dom, dom[:2000]
        assert "Something went wrong" not in dom and "Failed" not in dom
        png = screenshot(url, str(tmp_path / "speedscope.png"), "--window-size=1000,700", *gl, budget_ms=8000)
    finally:
        server.close()
    _, coloured = pixel_counts(png)
    # Its flame chart: coloured frames over much of the view, not an empty page.
    assert coloured > 0.1 * 1000 * 700, coloured


def test_report_subcommand_rebuilds_the_outputs_without_root(stack_loop_run):
    # The records and logs copied elsewhere (as from a fleet), read by nobody
    # (pytest's own temp dirs are root's alone).
    fleet = pathlib.Path(tempfile.mkdtemp(prefix="jankbpf-fleet-"))
    try:
        shutil.copy(stack_loop_run["dir"] / "run.jsonl", fleet / "janks.jsonl")
        for j in stack_loop_run["janks"]:
            for p in j["external_log"]:
                shutil.copy(p, fleet)
        os.chmod(fleet, 0o777)
        for f in fleet.iterdir():
            os.chmod(f, 0o644)
        p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", JANKBPF, "report",
                            str(fleet / "janks.jsonl"), "-o", str(fleet / "r.html"), "--perfetto",
                            str(fleet / "r.pftrace"), "--folded", str(fleet / "r.folded"), "--folded-by", "jank"],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        assert "3 janks and hangs, 3 stack logs read" in p.stderr, p.stderr
        names = flame_names(dump_dom("file://" + str(fleet / "r.html") + "#all"))
        assert {"inner", "middle", "outer", "wait_for_pipe"} <= names, sorted(names)
        folded = open(fleet / "r.folded").read()
        assert len(set(re.findall(r"^jank stack_loop pid \d+ tid \d+ #\d+", folded, re.M))) == 3
        text = protoc_decode(fleet / "r.pftrace")
        assert "perf_sample {" in text and "sched_switch {" in text
    finally:
        shutil.rmtree(fleet)


def test_report_subcommand_usage_errors(tmp_path):
    p = subprocess.run([JANKBPF, "report", str(tmp_path / "none.jsonl"), "-o", str(tmp_path / "x.html")],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "cannot read" in p.stderr
    (tmp_path / "j.jsonl").write_text("")
    p = subprocess.run([JANKBPF, "report", str(tmp_path / "j.jsonl")], capture_output=True, text=True)
    assert p.returncode == 2 and "-o FILE.html" in p.stderr and "--folded" in p.stderr
    p = subprocess.run([JANKBPF, "report", str(tmp_path / "j.jsonl"), "--folded", "x", "--folded-by", "thread"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "--folded-by" in p.stderr


def test_report_file_behind_a_symlink_is_a_usage_error(tmp_path):
    target = tmp_path / "target"
    target.write_text("keep")
    os.symlink(target, tmp_path / "r.html")
    rc, _, err = run_jankbpf("--duration", "1", "--report", str(tmp_path / "r.html"))
    assert rc == 2 and "symlink" in err, err
    assert target.read_text() == "keep"


def _hostile_jsonl(tmp_path, n, stack_log_text):
    """n jank records whose process, thread, symbols and paths are markup."""
    log = tmp_path / "stack-1-1.txt"
    log.write_text(stack_log_text)
    lines = []
    for i in range(n):
        r = {"type": "jank", "time": 1795290003176 + i * 500, "pid": 4000 + i % 10, "tid": 4000 + i % 10,
             "bundle_name": "</script><script>document.title='pwned'</script>"[:15 if i % 2 else 99],
             "thread_name": "<b onmouseover=x>", "exe": "/opt/\"><svg onload=document.title='pwned'>",
             "begin_time": 1795290002826 + i * 500, "end_time": 1795290003176 + i * 500, "duration_ms": 180.0 + i % 50,
             "threshold_ms": 150, "state_ms": {"running": 100.0, "runnable": 10.0, "sleeping": 70.0 + i % 50,
                                               "blocked_io": 0.0},
             "delivery_ms": 0.5, "wait_syscall": "epoll_wait", "boundary": "syscall", "begin_monotonic_ns": 10**12 + i * 5 * 10**8,
             "task_seq": i + 1, "external_log": [str(log), "javascript:document.title='pwned'"], "samples": 12,
             "off_cpu": [{"state": "sleeping", "duration_ms": 70.0, "kernel_stack": ["__schedule+0x618"],
                          "waker": {"pid": 1, "tid": 1, "comm": "<i>waker</i>", "kernel_stack": [],
                                    "user_stack": ["</script>+0x1 (libevil.so)"]}}]}
        lines.append(json.dumps(r))
    (tmp_path / "janks.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path / "janks.jsonl"


HOSTILE_LOG = """# jankbpf stack log: pid 4000 tid 4000 (x) task of 200 ms, 12 samples
12 #00 pc 00001431 /opt/app(main+33)(936bb2df09b61f487e032b7363f2a68ddc04ff15)
    8 #01 pc 00001889 /opt/app(<svg onload=document.title='pwned'>+9)(936bb2df09b61f487e032b7363f2a68ddc04ff15)
        8 #02 pc 000016a9 /opt/app(</script><script>document.title='pwned'</script>+9)(936bb2df09b61f487e032b7363f2a68ddc04ff15)
    4 #01 at slowHandler (/srv/app.js:10:3)
        4 #02 pc ffffffff821f8c03 [kernel.kallsyms](schedule+35)(e4f18d9dc1d0e6fc2b17e93e885a647b3c0a6fc1)
            4 #03 wait S (sleeping)
"""


def test_html_escapes_hostile_names_from_records_and_logs(tmp_path):
    jsonl = _hostile_jsonl(tmp_path, 3, HOSTILE_LOG)
    html = tmp_path / "r.html"
    p = subprocess.run([JANKBPF, "report", str(jsonl), "-o", str(html)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    dom = dump_dom("file://" + str(html) + "#all")
    assert "<title>jankbpf report</title>" in dom
    # Every payload shows up as text (escaped in the serialized DOM) ...
    assert "&lt;/script&gt;&lt;script&gt;document.title='pwned'&lt;/script&gt;" in dom
    names = flame_names(dom)
    assert "<svg onload=document.title='pwned'>" in {n.replace("&lt;", "<").replace("&gt;", ">") for n in names}
    assert "slowHandler" in names and "[off-CPU: sleeping]" in names
    # ... and none became an element or a javascript: link.
    assert not re.search(r"<(svg|b|i|img)\s+on", dom) and "<script>document" not in dom
    assert 'href="javascript:' not in dom and 'href="file://javascript:' in dom


def test_html_report_at_a_thousand_janks(tmp_path):
    jsonl = _hostile_jsonl(tmp_path, 1000, HOSTILE_LOG)
    html = tmp_path / "r.html"
    p = subprocess.run([JANKBPF, "report", str(jsonl), "-o", str(html)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    size = os.path.getsize(html)
    t0 = time.monotonic()
    dom = dump_dom("file://" + str(html), budget_ms=10000)
    took = time.monotonic() - t0
    print(f"1000 janks: HTML {size} bytes, rendered in {took:.1f} s (chromium start included)")
    # All in the timeline, one process's table drawn (a page of rows), the
    # other nine processes left for when they are opened.
    assert len(re.findall(r'class="tl-jank"', dom)) == 1000
    assert len(re.findall(r'<tr class="row"', dom)) == 100
    assert size < 3_000_000, size
    assert took < 60, took


NODE = shutil.which("node")


def test_node_report_names_js_functions(tmp_path):
    need(NODE, "node is not installed")
    script = tmp_path / "busy.js"
    script.write_text(
        "function busyLoopForJank(ms) { const end = Date.now() + ms; let x = 0;\n"
        "  while (Date.now() < end) { x += Math.sqrt(x + 1); } return x; }\n"
        "setTimeout(() => { busyLoopForJank(300); }, 3300);\n"
        "setTimeout(() => { process.exit(0); }, 4300);\n")
    html, folded = tmp_path / "node.html", tmp_path / "node.folded"
    rc, records, err = run_jankbpf("--ignore-startup-time", IGNORE, "--log-type", "1", "--log-dir", str(tmp_path / "logs"),
                                   "--report", str(html), "--folded", str(folded), "--",
                                   "node", "--perf-basic-prof", "--interpreted-frames-native-stack", str(script))
    assert rc == 0, err
    names = flame_names(dump_dom("file://" + str(html) + "#all"))
    assert "busyLoopForJank" in names, sorted(names)[:60]
    assert "uv_run" in names
    assert ";busyLoopForJank" in open(folded).read()


REDIS = shutil.which("redis-server")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_redis_report_and_trace(tmp_path):
    need(REDIS and shutil.which("redis-cli"), "redis-server is not installed (scripts/install-test-deps.sh)")
    port = str(_free_port())
    redis = subprocess.Popen([REDIS, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                              "--enable-debug-command", "yes"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if subprocess.run(["redis-cli", "-p", port, "ping"], capture_output=True).stdout.strip() == b"PONG":
                break
            time.sleep(0.05)
        time.sleep(3.3)  # past --ignore-startup-time
        out = {k: str(tmp_path / n) for k, n in (("html", "redis.html"), ("pf", "redis.pftrace"))}
        jb = Jankbpf("--pid", str(redis.pid), "--ignore-startup-time", IGNORE, "--log-dir", str(tmp_path / "logs"),
                     "--report", out["html"], "--perfetto", out["pf"])
        subprocess.run(["redis-cli", "-p", port, "DEBUG", "SLEEP", "0.6"], check=True, capture_output=True)
        assert jb.wait_for(lambda r: r.get("type") == "jank", timeout=30)
        time.sleep(4)  # the trace is saved 3 s after the crossing
        assert jb.stop() == 0, jb.stderr
    finally:
        redis.kill()
        redis.wait()
    names = flame_names(dump_dom("file://" + out["html"] + "#all"))
    assert "debugCommand" in names and "aeMain" in names, sorted(names)[:80]
    text = protoc_decode(out["pf"])
    assert re.search(r'function_names \{\s+iid: \d+\s+str: "debugCommand"', text)
    assert re.search(r'thread_name: "redis-server"', text)
    assert "sched_switch {" in text


# ---- why: the causes drawn (README "Why", "Looking at janks") ---------------

def _parse_text_proto(text):
    """protoc's text format as nested lists of (field, value) pairs; a
    message's value is its own list, a string's its unescaped text."""
    root, stack = [], []
    cur = root
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.endswith("{"):
            child = []
            cur.append((line[:-1].strip(), child))
            stack.append(cur)
            cur = child
        elif line == "}":
            cur = stack.pop()
        else:
            k, v = line.split(":", 1)
            v = v.strip()
            if v.startswith('"'):
                v = v[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1").decode("utf-8", "replace")
            cur.append((k, v))
    return root


def _get(msg, field):
    return [v for k, v in msg if k == field]


def _one(msg, field, default=None):
    got = _get(msg, field)
    return got[0] if got else default


def _args(ev):
    """A TrackEvent's debug annotations: name -> the annotation's pairs."""
    return {_one(a, "name"): a for a in _get(ev, "debug_annotations")}


@pytest.fixture(scope="module")
def cause_run(tmp_path_factory):
    """One live run of cause_target with a lock held by a computing worker,
    a two-level chain (a peer process waiting on its worker's lock) and a
    timed sleep, watched with --report and --perfetto."""
    from test_causes import CauseTarget, jank_of
    d = tmp_path_factory.mktemp("causes")
    html, pf = str(d / "causes.html"), str(d / "causes.pftrace")
    target = CauseTarget(["lock:300", "chain:300", "sleep:250", "spin:5"])
    try:
        jb = Jankbpf("--pid", str(target.pid), "--ignore-startup-time", "3", "--report", html, "--perfetto", pf)
        tasks = target.tasks()[:-1]
        assert jb.wait(30) == 0, jb.stderr
    finally:
        target.kill()
    janks = [j for j in jb.of_type("jank") if j["pid"] == target.pid]
    with open(d / "causes.jsonl", "w") as f:
        for r in jb.records:
            f.write(json.dumps(r) + "\n")
    by_kind = {t["kind"]: jank_of(janks, t) for t in tasks}
    for kind, top in (("lock", "lock"), ("chain", "peer"), ("sleep", "sleep")):
        assert by_kind[kind]["cause"][0]["kind"] == top, by_kind[kind]["cause"]
    return {"dir": d, "html": html, "pftrace": pf, "janks": janks, "by_kind": by_kind, "ready": target.ready}


def test_html_report_shows_each_janks_why_and_the_processs_causes(cause_run):
    dom = dump_dom("file://" + cause_run["html"] + "#all")
    ready, by_kind = cause_run["ready"], cause_run["by_kind"]
    # Per jank: its why line, and its slices (kind, ms, identity).
    for j in cause_run["janks"]:
        assert f'<span class="why">{j["why"]}</span>' in dom, j["why"]
    tables = re.findall(r'<table class="causes jank-causes">(.*?)</table>', dom, re.S)
    assert len(tables) == len(cause_run["janks"]), len(tables)
    lock = by_kind["lock"]["cause"][0]
    m = re.search(r'<tr class="cause-lock"><td>lock</td><td>(\d+) ms</td><td>mutex ' + re.escape(lock["address"])
                  + r' \(cause_target\+0x[0-9a-f]+\) held by holder\[' + str(ready["holder_tid"])
                  + r'\] running crunch_a \(cause_target\.c:\d+\)</td>', dom)
    assert m and abs(int(m.group(1)) - lock["ms"]) <= 1, lock
    assert re.search(r'<td>chainb\[' + str(ready["chainb_tid"]) + r'\] of pid \d+ via read on pipe:\[\d+\][^<]*'
                     r', which waited (on lock 0x[0-9a-f]+ held by|for) chainc\[' + str(ready["chainc_tid"])
                     + r'\] running crunch_c', dom) or re.search(
                     r'<td>chainb\[' + str(ready["chainb_tid"]) + r'\] via read on pipe:\[\d+\][^<]*'
                     r', which waited (on lock 0x[0-9a-f]+ held by|for) chainc\[' + str(ready["chainc_tid"])
                     + r'\] running crunch_c', dom), re.findall(r"<td>chainb[^<]*</td>", dom)
    assert re.search(r'<td>(clock_)?nanosleep from nap_here \(cause_target\.c:\d+\)</td>', dom)
    # Per process: each kind, the janks it was the largest cause of, its
    # total and its top identities.
    (table,) = re.findall(r'<table class="causes proc-causes">(.*?)</table>', dom, re.S)
    n = len(cause_run["janks"])

    def largest(j):
        kinds = {c["kind"] for c in j["cause"]}
        return max(kinds, key=lambda k: sum(c["ms"] for c in j["cause"] if c["kind"] == k)) if kinds else "none"
    for kind in ("lock", "peer", "sleep"):
        total = sum(c["ms"] for j in cause_run["janks"] for c in j["cause"] if c["kind"] == kind)
        m = re.search(rf'<tr class="cause-{kind}"><td>{kind}</td><td>(\d+) of (\d+) janks</td><td>(\d+) ms</td>'
                      r'<td class="ids">([^<]*)</td>', table)
        assert m, (kind, table[:2000])
        assert (int(m.group(1)), int(m.group(2))) == (sum(largest(j) == kind for j in cause_run["janks"]), n)
        assert abs(int(m.group(3)) - total) <= 1, (m.group(3), total)
    assert f"held by holder[{ready['holder_tid']}] running crunch_a" in table


def test_perfetto_trace_carries_causes_as_args_and_flows_from_the_owner_and_peer(cause_run):
    trace = _parse_text_proto(protoc_decode(cause_run["pftrace"]))
    ready, by_kind = cause_run["ready"], cause_run["by_kind"]
    packets = _get(trace, "packet")
    # Tracks of the followed threads: the lock's owner, the peer, its worker.
    uuid_of = {}
    for p in packets:
        for d in _get(p, "track_descriptor"):
            for t in _get(d, "thread"):
                uuid_of[int(_one(t, "tid"))] = _one(d, "uuid")
                uuid_of[_one(t, "thread_name"), int(_one(t, "tid"))] = _one(d, "uuid")
    for comm, tid in (("holder", ready["holder_tid"]), ("chainb", ready["chainb_tid"]), ("chainc", ready["chainc_tid"])):
        assert (comm, tid) in uuid_of, (comm, tid)
    events = [(te, int(_one(p, "timestamp", 0))) for p in packets for te in _get(p, "track_event")]
    for kind, j in by_kind.items():
        # The slice's name rounds the duration to 0.1 ms, the record's to
        # 0.001 ms: rounded again, 300.2504 (name "300.3") reads "300.2"
        # (CI on cafc707). Matched within the two roundings.
        (ev,) = [e for e, _ in events if _one(e, "type") == "TYPE_SLICE_BEGIN"
                 and (m := re.match(r"jank (\d+\.\d) ms", _one(e, "name", "")))
                 and abs(float(m.group(1)) - j["duration_ms"]) <= 0.0505]
        args = _args(ev)
        assert _one(args["why"], "string_value") == j["why"]
        assert _one(args["largest_cause"], "string_value") == j["cause"][0]["kind"]
        # args.cause: one {kind, ms, identity} per slice, in the record's order.
        items = [{k: _one(v, "string_value", _one(v, "double_value")) for k, v in
                  ((_one(e, "name"), e) for e in _get(a, "dict_entries"))} for a in _get(args["cause"], "array_values")]
        assert [i["kind"] for i in items] == [c["kind"] for c in j["cause"]], items
        assert all(abs(float(i["ms"]) - c["ms"]) <= 0.001 for i, c in zip(items, j["cause"])), items
        assert all(i["identity"] for i in items), items
    # Flows: from the owner's track to the lock waiter, from the peer's to
    # the chain's waiter, and from the peer's worker to the peer.
    flows = {}
    for e, ts in events:
        for f in _get(e, "flow_ids"):
            flows.setdefault(f, {})["from"] = (e, ts)
        for f in _get(e, "terminating_flow_ids"):
            flows.setdefault(f, {})["to"] = (e, ts)

    def cause_flow(src_tid, dst_tid, name):
        for f in flows.values():
            if "from" in f and "to" in f:
                (src, ts), (dst, _) = f["from"], f["to"]
                if (_one(src, "track_uuid") == uuid_of[src_tid] and _one(dst, "track_uuid") == uuid_of[dst_tid]
                        and _one(src, "name", "").startswith("cause: ") and _one(dst, "name", "").startswith(name)):
                    return ts
        return None
    at = cause_flow(ready["holder_tid"], ready["tid"], f"lock: waited for holder[{ready['holder_tid']}]")
    lj = by_kind["lock"]
    assert at and lj["begin_monotonic_ns"] < at <= lj["begin_monotonic_ns"] + lj["duration_ms"] * 1e6, at
    assert cause_flow(ready["chainb_tid"], ready["tid"], f"peer: waited for chainb[{ready['chainb_tid']}]")
    assert cause_flow(ready["chainc_tid"], ready["chainb_tid"], f"waited for chainc[{ready['chainc_tid']}]")


def test_report_subcommand_draws_the_causes_from_the_records(cause_run):
    """`jankbpf report` reads the slices back from the JSON lines: the same
    why lines, slices and causes table as the live page."""
    out = cause_run["dir"] / "after.html"
    p = subprocess.run([JANKBPF, "report", str(cause_run["dir"] / "causes.jsonl"), "-o", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    live = dump_dom("file://" + cause_run["html"] + "#all")
    after = dump_dom("file://" + str(out) + "#all")
    for j in cause_run["janks"]:
        assert f'<span class="why">{j["why"]}</span>' in after, j["why"]
    # The same tables; times may differ in their last digit (the records
    # keep µs, the live page had the ns).
    def tables(dom):
        return [re.sub(r"\d+(\.\d)? ms", "N ms", t)
                for t in re.findall(r'<table class="causes [a-z-]+">.*?</table>', dom, re.S)]
    assert len(tables(after)) == len(cause_run["janks"]) + 1
    assert tables(after) == tables(live)
