"""End-to-end tests of Wayland frames (issue 28), under Debian's weston with
its headless backend: tests/apps/wayland/wl_frames (libwayland-client, shm,
xdg-shell, presentation feedback) plants slow frames of known lengths among
hundreds of fast ones, stops committing for 0.8 s, and draws two surfaces;
tests/apps/wayland/gtk_frames.py is a GTK 4 app (python3-gi, software
rendering) whose draw handler spins on planted frames. Each client prints
its own ground truth: every frame's callback-to-commit time on
CLOCK_MONOTONIC, and the presentation times the compositor told it.

Checked: every planted frame is a `frame` record with its deadline, the
jank type and Choreographer's skipped-frame count of the client's own
measure, and a stack naming the slow function (slow_draw, and for GTK the
Python function slow_paint); every frame (from the Perfetto trace's
FrameTimeline packets) within 1 ms of the client's measure; at most 1 % of
frames janky where the client's own data says they were not; the frozen
frame links to its jank record; both surfaces are counted apart; the
summary, Prometheus, the Perfetto trace (protoc against Perfetto's
FrameTimelineEvent) and the HTML report (headless Chromium) show them;
`--frames off` attaches nothing and reports no frame.
"""
import json
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

import pytest

from harness import BUILD, ROOT, Jankbpf
import sched_trace
from viewers import PROTO_DIR, dump_dom, need, protoc_decode

WL_FRAMES = os.path.join(BUILD, "tests", "wl_frames")
GTK_FRAMES = os.path.join(ROOT, "tests", "apps", "wayland", "gtk_frames.py")
IGNORE = "3"       # --ignore-startup-time: the clients warm up longer than this
WARMUP_MS = "3600"
INTERVAL_MS = 1000 / 60  # weston's headless output: 60 Hz (wl_output and presentation feedback)

# The single-surface client's planted frames (index: ms of CPU spun in
# slow_draw), away from multiples of the refresh so the skipped count is clear.
PLANTED = {100: 25, 160: 42, 220: 58, 280: 75, 340: 110}
STALL = (120, 800)  # the stalling client sleeps 800 ms in frame 120: no commit meanwhile
GTK_PLANTED = {70: 60, 140: 95}


def _weston():
    need(shutil.which("weston"), "weston is not installed (scripts/install-test-deps.sh)")
    need(os.path.exists(WL_FRAMES), f"{WL_FRAMES} is not built (make apps)")


@pytest.fixture(scope="module")
def compositor():
    """Debian's weston, headless, on a socket of its own."""
    _weston()
    runtime = tempfile.mkdtemp(prefix="jb-wayland-")
    os.chmod(runtime, 0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": runtime}
    log = open(os.path.join(runtime, "weston.log"), "w")
    w = subprocess.Popen(["weston", "--backend=headless-backend.so", "--socket=jb-frames", "--no-config",
                          "--idle-time=0", "--width=320", "--height=240"], env=env, stdout=log, stderr=log)
    deadline = time.monotonic() + 20
    while not os.path.exists(os.path.join(runtime, "jb-frames")):
        assert w.poll() is None, open(os.path.join(runtime, "weston.log")).read()[-2000:]
        assert time.monotonic() < deadline, "weston did not make its socket"
        time.sleep(0.05)
    yield {**env, "WAYLAND_DISPLAY": "jb-frames"}
    w.send_signal(signal.SIGTERM)
    try:
        w.wait(10)
    except subprocess.TimeoutExpired:
        w.kill()
        w.wait()
    log.close()
    shutil.rmtree(runtime, ignore_errors=True)


def _client(env, *args):
    return subprocess.Popen(list(args), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _truth(proc, timeout=90):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-2000:]
    lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    assert any(l.get("done") for l in lines), out[-1000:]
    return lines


def _skipped(ms, interval=INTERVAL_MS):
    return max(0, math.ceil(ms / interval) - 1)


def _metrics_url(jb):
    assert jb.wait_stderr("metrics: http://", 10), jb.stderr
    m = re.search(r"metrics: (http://\S+/metrics)", jb.stderr)
    return m.group(1)


@pytest.fixture(scope="module")
def wl_run(compositor, tmp_path_factory):
    """One jankbpf on every wl_frames (--comm), a second with --frames off,
    and three clients at once: planted slow frames, a stall, two surfaces."""
    d = tmp_path_factory.mktemp("frames")
    with sched_trace.SchedTrace(["wl_frames"]) as trace:
        run = _wl_run(compositor, d)
        trace.stop()
        run["sched"] = trace.events
    return run


def _wl_run(compositor, d):
    jb = Jankbpf("--comm", "wl_frames", "--ignore-startup-time", IGNORE, "--perfetto", str(d / "f.pftrace"),
                 "--report", str(d / "f.html"), "--metrics", "127.0.0.1:0", timeout=60)
    off = Jankbpf("--comm", "wl_frames", "--ignore-startup-time", IGNORE, "--frames", "off", timeout=60)
    single = _client(compositor, WL_FRAMES, "--warmup-ms", WARMUP_MS, "--frames", "400",
                     "--slow", ",".join(f"{i}:{ms}" for i, ms in PLANTED.items()))
    stall = _client(compositor, WL_FRAMES, "--warmup-ms", WARMUP_MS, "--frames", "200",
                    "--stall", f"{STALL[0]}:{STALL[1]}")
    two = _client(compositor, WL_FRAMES, "--warmup-ms", WARMUP_MS, "--frames", "200", "--surfaces", "2",
                  "--slow", "60:45")
    truth = {"single": _truth(single), "stall": _truth(stall), "two": _truth(two)}
    pids = {k: v[0]["pid"] for k, v in truth.items()}
    time.sleep(1.2)  # the last frames' drain (every 500 ms) and their present timeout
    url = _metrics_url(jb)
    try:
        metrics = urllib.request.urlopen(url, timeout=10).read().decode()
    except OSError as e:  # once in CI: refused; say whether jankbpf was still there
        pytest.fail(f"{url}: {e}; jankbpf exit status {jb.proc.poll()} (None: running); "
                    f"its stderr:\n{jb.stderr[-3000:]}")
    assert jb.stop() == 0, jb.stderr[-2000:]
    assert off.stop() == 0, off.stderr[-2000:]
    frames = jb.of_type("frame")
    return {"jb": jb, "off": off, "truth": truth, "pids": pids, "metrics": metrics, "dir": d,
            "frames": {k: [f for f in frames if f["pid"] == p] for k, p in pids.items()}}


def _client_frames(truth, surface=0):
    return [l for l in truth if "ms" in l and l["surface"] == surface]


def _surface_name(truth, surface=0):
    """The client's surface as jankbpf names it, by the protocol id the
    client printed: not always wl_surface@3 (a roundtrip's callback id may
    not be given back yet when the surface is made; CI once)."""
    (sid,) = [l["surface_id"]["id"] for l in truth if l.get("surface_id", {}).get("surface") == surface]
    return f"wl_surface@{sid}"


def _match(rec, client):
    """The client's frame whose start is the record's (within 1 ms)."""
    start = rec["actual"]["start_monotonic_ns"]
    best = min(client, key=lambda c: abs(c["start_ns"] - start))
    return best if abs(best["start_ns"] - start) < 1_000_000 else None


def _latencies(truth):
    """Each frame's callback-to-present latency by the client's own data
    (its presentation times are CLOCK_MONOTONIC_RAW under weston's headless
    backend), by (surface, frame), and their median."""
    raw_minus_mono = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW) - time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    starts = {(l["surface"], l["frame"]): l["start_ns"] for l in truth if "ms" in l}
    lat = {}
    for l in truth:
        p = l.get("presented")
        if p and (p["surface"], p["frame"]) in starts:
            mono = p["ns"] - (raw_minus_mono if p["clock"] == 4 else 0)
            lat[(p["surface"], p["frame"])] = (mono - starts[(p["surface"], p["frame"])]) / 1e6
    vals = sorted(lat.values())
    return lat, vals[len(vals) // 2] if vals else None


def _true_jank(rec, c, lat, usual):
    """Whether the client's own data says this frame was janky as reported:
    late by its own measure plus the wait for a CPU the kernel measured
    before its callback ran, or presented most of a refresh later than
    usual by its own presentation times."""
    if rec["jank_type"] == "app_deadline_missed":
        return c["ms"] + rec["start_delay_ms"] > rec["interval_ms"] - 0.05
    if rec["jank_type"] in ("compositor_late", "buffer_stuffing"):
        mine = lat.get((c["surface"], c["frame"]))
        return mine is not None and usual is not None and mine > usual + 0.8 * rec["interval_ms"]
    return rec["jank_type"] == "dropped"


def test_planted_frames_reported_with_deadline_jank_type_and_skipped_frames(wl_run):
    truth = _client_frames(wl_run["truth"]["single"])
    recs = wl_run["frames"]["single"]
    planted = [c for c in truth if c["planted_ms"]]
    assert len(planted) == len(PLANTED)
    for c in planted:
        hit = [r for r in recs if _match(r, [c])]
        assert len(hit) == 1, (c, [r["actual"] for r in recs][:10])
        r = hit[0]
        assert r["jank_type"] == "app_deadline_missed", r
        assert r["interval_ms"] == pytest.approx(INTERVAL_MS, abs=0.01)
        assert r["expected"]["deadline_monotonic_ns"] - r["expected"]["start_monotonic_ns"] == pytest.approx(
            INTERVAL_MS * 1e6, abs=1e4)
        assert abs(r["duration_ms"] - c["ms"]) < 1.0, (r["duration_ms"], c["ms"])
        # Choreographer's count, from the client's own measure (plus a start
        # delay the kernel saw, if the callback waited for a CPU).
        spent = c["ms"] + r["start_delay_ms"]
        assert r["skipped_frames"] in {_skipped(spent - 0.1), _skipped(spent + 0.1)}, (r["skipped_frames"], spent)
        assert r["surface"] == _surface_name(wl_run["truth"]["single"]), r["surface"]
        assert r["bundle_name"] == "wl_frames"
        assert sum(r["state_ms"].values()) == pytest.approx(r["duration_ms"], abs=0.05)
        # Stacks sampled past the deadline name the slow code (not for a
        # frame that spent its overrun waiting for a CPU on a loaded machine).
        if r["state_ms"]["running"] > c["planted_ms"] / 2 and r["samples"]:
            assert "slow_draw" in r["heaviest_stack"], r["heaviest_stack"][:600]
    # Shorter than --threshold: no long task, no causes collected, no why.
    assert not [r for r in recs if r.get("why") or r.get("task_seq")], [r for r in recs if r.get("why")][:2]
    named = [r for r in recs if "slow_draw" in r["heaviest_stack"]]
    assert len(named) >= 3, "the planted frames' stacks should name slow_draw"


def test_false_janky_frames_at_most_one_percent(wl_run):
    for name in ("single", "two"):
        truth = wl_run["truth"][name]
        recs = wl_run["frames"][name]
        summary_rows = [s for s in wl_run["jb"].summary()["frames"] if s["pid"] == wl_run["pids"][name]]
        total = sum(s["frames"] for s in summary_rows)
        assert total >= 200
        lat, usual = _latencies(truth)
        false = []
        for r in recs:
            c = _match(r, [l for l in truth if "ms" in l])
            if c is None:
                continue  # a frame of the start, before the client's count
            if not _true_jank(r, c, lat, usual):
                false.append((r["frame_number"], r["jank_type"], r["duration_ms"], r["start_delay_ms"]))
        assert len(false) <= 0.01 * total, (name, false[:10], total)
        # And none missed: every frame the client measured over its deadline.
        late = [c for c in truth if "ms" in c and c["ms"] > INTERVAL_MS + 1.0]
        for c in late:
            assert any(_match(r, [c]) for r in recs), ("missed", c)


def _frame_timeline(path):
    """Every FrameTimelineEvent of the trace, decoded by protoc against
    Perfetto's FrameTimelineEvent: (kind, timestamp, fields)."""
    protoc = shutil.which("protoc")
    need(protoc, "protoc is not installed (protobuf-compiler; scripts/install-test-deps.sh)")
    with open(path, "rb") as f:
        p = subprocess.run([protoc, f"--proto_path={PROTO_DIR}", "--decode=perfetto.protos.Trace",
                            os.path.join(PROTO_DIR, "frame_timeline.proto")], stdin=f, capture_output=True,
                           timeout=120)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    text = p.stdout.decode(errors="replace")
    events = []
    for m in re.finditer(r"packet \{\n  timestamp: (\d+)\n  trusted_packet_sequence_id: \d+\n"
                         r"  \[com\.android\.internal\.FrameworksNativeTracePacket\.frame_timeline_event\] \{\n"
                         r"    (\w+) \{\n(.*?)\n    \}\n  \}\n\}", text, re.S):
        fields = dict(re.findall(r"^\s+(\w+): (.+)$", m.group(3), re.M))
        events.append((m.group(2), int(m.group(1)), fields))
    return text, events


def _off_cpu_ms(events, tid, lo, hi):
    """ms thread `tid` was not running over [lo, hi], by the sched trace (0
    where the trace never placed it)."""
    if hi <= lo:
        return 0.0
    found = sched_trace.stretches(events, tid, lo, hi) or []
    return sum(b - a for st, a, b in found if st != "running") / 1e6


def test_every_frame_within_1_ms_in_the_perfetto_frame_timeline(wl_run):
    text, events = _frame_timeline(wl_run["dir"] / "f.pftrace")
    assert events, text[:2000]
    kinds = {k for k, _, _ in events}
    assert {"expected_surface_frame_start", "actual_surface_frame_start", "frame_end"} <= kinds
    starts = {int(f["cookie"]): (ts, f) for k, ts, f in events if k.endswith("_surface_frame_start")}
    ends = {int(f["cookie"]): ts for k, ts, f in events if k == "frame_end"}
    assert set(starts) == set(ends), "every slice ends"
    actual = [(ts, ends[c], f) for c, (ts, f) in starts.items() if "present_type" in f]
    expected = [(ts, ends[c], f) for c, (ts, f) in starts.items() if "present_type" not in f]
    assert len(actual) == len(expected)
    for _, _, f in actual:
        assert f["layer_name"].startswith('"wl_surface@') and "wl_frames" in f["layer_name"]
    # Every frame the single client measured is in the actual timeline, its
    # length within 1 ms of the client's.
    pid = wl_run["pids"]["single"]
    mine = sorted((s, e) for s, e, f in actual if int(f["pid"]) == pid)
    client = _client_frames(wl_run["truth"]["single"])
    # Plus, where the client was off the CPU between jankbpf's edge and its
    # own clock read (a preemption between the callback's uprobe and
    # frame_done's read, or between the read and the commit's uprobe), that
    # time: the sched trace's. CI on eb1e653: one frame of 400 off by >= 1 ms
    # beside the fuzzers; none in 1,600 frames here (4 runs) beside two to
    # four spinners (worst 0.06 ms where printed).
    assert any(f.get("next_pid") == str(pid) for _, k, f in wl_run["sched"] if k == "sched_switch"), \
        "the sched trace saw none of the client's switches"
    matched, errors = 0, []
    for c in client:
        near = [m for m in mine if abs(m[0] - c["start_ns"]) < 1_000_000]
        if not near:
            continue
        matched += 1
        (s, e), err = near[0], abs((near[0][1] - near[0][0]) / 1e6 - c["ms"])
        if err < 1.0:
            continue
        off = sum(_off_cpu_ms(wl_run["sched"], pid, min(a, b), max(a, b))
                  for a, b in ((s, c["start_ns"]), (e, c["end_ns"])))
        if err >= 1.0 + off:
            errors.append({"frame": c["frame"], "client": (c["start_ns"], c["end_ns"]), "jankbpf": (s, e),
                           "error_ms": err, "off_cpu_at_edges_ms": off})
    assert matched >= 0.97 * len(client), (matched, len(client))
    assert not errors, errors
    # The planted frames carry Perfetto's App Deadline Missed (64).
    janky = [f for _, _, f in actual if int(f["pid"]) == pid and f["jank_type"] == "64"]
    assert len(janky) >= len(PLANTED)
    assert "PRESENT_LATE" in text and "on_time_finish: false" in text and "SEVERITY_FULL" in text
    assert "PREDICTION_VALID" in text
    # The janky frames' own track with their stacks.
    assert re.search(r'name: "janky frame \d+\.\d ms app_deadline_missed', text)
    assert f'name: "janky frames of {_surface_name(wl_run["truth"]["single"])}"' in text


def test_a_frame_that_stops_committing_is_frozen_and_links_to_its_jank(wl_run):
    recs = wl_run["frames"]["stall"]
    truth = _client_frames(wl_run["truth"]["stall"])
    c = next(c for c in truth if c["planted_ms"])
    r = next((r for r in recs if _match(r, [c])), None)
    assert r is not None, recs[:3]
    assert r["duration_ms"] == pytest.approx(c["ms"], abs=1.0)
    assert r["duration_ms"] >= STALL[1]
    assert r["jank_type"] == "app_deadline_missed"
    spent = c["ms"] + r["start_delay_ms"]
    assert r["skipped_frames"] in {_skipped(spent - 0.1), _skipped(spent + 0.1)}, (r["skipped_frames"], spent)
    assert r["state_ms"]["sleeping"] > 0.9 * STALL[1], r["state_ms"]  # asleep in stalled_draw
    # Where it slept: the off-CPU capture of its switch-out, inside the frame.
    assert r["samples"] >= 1 and "stalled_draw" in r["heaviest_stack"], (r["heaviest_stack"][:800], {k: v for k, v in r.items() if k not in ("heaviest_stack", "stack")})
    # Past the threshold inside one task: the jank record of that task.
    janks = wl_run["jb"].of_type("jank", pid=wl_run["pids"]["stall"])
    assert r.get("task_seq") and any(j["task_seq"] == r["task_seq"] for j in janks), (r.get("task_seq"), janks)
    # And that task's why, whose largest cause is the sleep in stalled_draw
    # (README, Frames: "Why").
    (jank,) = [j for j in janks if j["task_seq"] == r["task_seq"]]
    assert jank["cause"][0]["kind"] == "sleep" and jank["cause"][0]["frame"].startswith("stalled_draw ("), jank["cause"]
    assert r.get("why") == [jank["why"]] and "stalled_draw" in jank["why"], (r.get("why"), jank["why"])
    print(f"frozen frame {r['frame_number']}: task_seq {r['task_seq']}, why {r['why']}")
    # The Perfetto trace's janky-frame slice carries it as an arg.
    blocks = re.findall(r"\n  track_event \{\n(.*?)\n  \}", "\n" + protoc_decode(wl_run["dir"] / "f.pftrace"), re.S)
    frame_slices = [b for b in blocks if 'name: "janky frame ' in b and f"int_value: {r['frame_number']}\n" in b]
    assert any(f'string_value: "{jank["why"]}"\n      name: "why"' in b for b in frame_slices), frame_slices[:2]
    row = next(s for s in wl_run["jb"].summary()["frames"] if s["pid"] == wl_run["pids"]["stall"])
    assert row["frozen_frames"] == 1
    assert row["frame_time_ms"]["max"] == pytest.approx(c["ms"], abs=1.0)


def test_two_surfaces_counted_apart(wl_run):
    pid = wl_run["pids"]["two"]
    rows = [s for s in wl_run["jb"].summary()["frames"] if s["pid"] == pid]
    assert len(rows) == 2, rows
    assert len({r["surface"] for r in rows}) == 2
    for r in rows:
        assert r["frames"] >= 190
    truth = wl_run["truth"]["two"]
    c = next(l for l in truth if "ms" in l and l["planted_ms"])
    assert c["surface"] == 0
    hit = [r for r in wl_run["frames"]["two"] if _match(r, [c])]
    assert len(hit) == 1 and hit[0]["jank_type"] == "app_deadline_missed"
    first_surface = hit[0]["surface"]
    row = next(r for r in rows if r["surface"] == first_surface)
    assert row["janky_frames"] >= 1
    assert row["slow_frames"] >= 1


def test_summary_and_prometheus_frame_statistics(wl_run):
    rows = [s for s in wl_run["jb"].summary()["frames"] if s["pid"] == wl_run["pids"]["single"]]
    assert len(rows) == 1
    r = rows[0]
    client = _client_frames(wl_run["truth"]["single"])
    assert r["frames"] >= len(client)  # and the frames between the startup window and the count
    assert r["janky_frames"] >= len(PLANTED)
    assert r["slow_frames"] >= len(PLANTED)
    assert r["jank_rate"] == pytest.approx(r["janky_frames"] / r["frames"], abs=1e-4)
    assert r["frame_time_ms"]["max"] == pytest.approx(max(c["ms"] for c in client), abs=1.0)
    assert r["frame_time_ms"]["p50"] < 2.0
    assert sum(r["histogram"]["counts"]) == r["frames"]
    assert r["interval_ms"] == pytest.approx(INTERVAL_MS, abs=0.01)
    assert r["interval_source"] in ("presentation", "output")
    m = wl_run["metrics"]
    # By (comm, exe, container, surface): the three clients' surfaces of one
    # protocol id add up, so each check sums over the ids the clients had
    # (usually all wl_surface@3; CI once had another, missing a fixed @3).
    base = 'comm="wl_frames",exe="' + WL_FRAMES + '",container_id=""'
    names = {k: _surface_name(v) for k, v in wl_run["truth"].items()}
    frame_lines = "\n".join(l for l in m.splitlines() if "frame" in l and "_bucket" not in l)
    why = f"surfaces {names}\n{frame_lines[:6000]}"

    def value(metric, surface, extra=""):
        labels = base + f',surface="{surface}"' + extra
        hit = re.search(r"^" + metric + r"\{" + re.escape(labels) + r"\} (\d+)$", m, re.M)
        return int(hit.group(1)) if hit else None

    single = names["single"]
    first = sorted(set(names.values()))
    assert (value("jankbpf_frames_total", single) or 0) >= len(client), why
    janky = [value("jankbpf_janky_frames_total", s, ',jank_type="app_deadline_missed"') for s in first]
    assert sum(j or 0 for j in janky) >= len(PLANTED) + 2, why  # the stall's and the two's slow frame too
    labels = base + f',surface="{single}"'
    assert re.search(r'^jankbpf_frame_duration_seconds_bucket\{' + re.escape(labels) + r',le="\+Inf"\} \d+$', m, re.M)
    assert re.search(r'^jankbpf_frame_time_seconds\{' + re.escape(labels) + r',quantile="0.99"\} ', m, re.M)
    assert value("jankbpf_frozen_frames_total", names["stall"]) == 1, why
    assert "pid=" not in m


def test_html_report_draws_the_frame_strip_and_a_janky_frames_stacks(wl_run):
    path = wl_run["dir"] / "f.html"
    dom = dump_dom("file://" + str(path) + "#frame=0")
    assert 'id="jb-frames-section"' in dom and 'class="fstrip"' in dom
    assert dom.count('class="fr-deadline"') >= 4  # a deadline per surface: 1 + 1 + 2
    janky = len(re.findall(r'class="fr-janky"', dom))
    assert janky >= len(PLANTED) + 2
    # #frame=0 opened the first janky frame: its verdict and its stacks.
    assert 'id="frame-0"' in dom and "app_deadline_missed" in dom
    assert "stacks of this frame past its deadline" in dom


def test_frames_off_attaches_nothing(wl_run):
    off = wl_run["off"]
    assert not off.of_type("frame")
    s = off.summary()
    assert "frames" not in s
    assert not any(p["name"].startswith("jb_wl_") for p in s["bpf"]), s["bpf"]


@pytest.fixture(scope="module")
def gtk_run(compositor, tmp_path_factory, wl_run):
    need(os.path.exists("/usr/bin/python3") and subprocess.run(
        ["/usr/bin/python3", "-c", "import gi; gi.require_version('Gtk', '4.0'); from gi.repository import Gtk"],
        capture_output=True, env=compositor).returncode == 0,
        "GTK 4 for Python is not installed (python3-gi, gir1.2-gtk-4.0, python3-gi-cairo)")
    env = {**compositor, "GSK_RENDERER": "cairo", "GDK_BACKEND": "wayland", "NO_AT_BRIDGE": "1"}
    # The command's stdout (its ground truth) comes on jankbpf's stderr.
    jb = Jankbpf("--ignore-startup-time", IGNORE, "--", GTK_FRAMES, "--warmup-ms", WARMUP_MS, "--frames", "200",
                 "--slow", ",".join(f"{i}:{ms}" for i, ms in GTK_PLANTED.items()), timeout=60, env=env)
    assert jb.wait(90) == 0, jb.stderr[-3000:]
    truth = [json.loads(l) for l in jb.stderr.splitlines() if l.startswith("{")]
    return {"records": jb.records, "truth": truth}


def test_gtk4_app_janky_frames_name_the_python_function(gtk_run):
    truth = [t for t in gtk_run["truth"] if "draw_ms" in t]
    assert len(truth) >= 190, gtk_run["truth"][-3:]
    frames = [r for r in gtk_run["records"] if r["type"] == "frame"]
    planted = [t for t in truth if t["planted_ms"]]
    assert len(planted) == len(GTK_PLANTED)
    for t in planted:
        # GTK's frame: its frame clock's cycle from the frame callback to the
        # commit after paint; the draw handler ran inside it.
        hit = [r for r in frames if r["actual"]["start_monotonic_ns"] <= t["draw_ns"] <= r["actual"]["end_monotonic_ns"]]
        s = next(r for r in gtk_run["records"] if r["type"] == "summary")
        assert len(hit) == 1, (t, [(r["actual"], r["duration_ms"]) for r in frames],
                               [{k: v for k, v in x.items() if k != "histogram"} for x in s["frames"]],
                               s["lost_events"], s.get("features_missing"))
        r = hit[0]
        assert r["jank_type"] == "app_deadline_missed"
        assert r["duration_ms"] >= t["draw_ms"]
        assert r["skipped_frames"] == _skipped(r["duration_ms"] + r["start_delay_ms"], r["interval_ms"])
        assert r["bundle_name"] == "gtk_frames.py"
        if r["state_ms"]["running"] > t["planted_ms"] / 2:
            assert r["runnable_name"] == "slow_paint", (r.get("runnable_name"), r["heaviest_stack"][:1500])
            assert any(f.get("runtime") == "python" and f["symbol"] == "slow_paint" for f in r["stack"])
    assert sum(1 for r in frames if r.get("runnable_name") == "slow_paint") >= 1
    s = next(r for r in gtk_run["records"] if r["type"] == "summary")
    row = next(x for x in s["frames"] if x["bundle_name"] == "gtk_frames.py")
    assert row["frames"] >= 190
    assert row["janky_frames"] >= len(GTK_PLANTED)
    assert row["janky_frames"] <= len(GTK_PLANTED) + 0.01 * row["frames"] + 2, row
    assert s["schema_version"] == "1.6"
