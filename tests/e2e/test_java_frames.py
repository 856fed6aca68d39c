"""End-to-end tests of Java frames (issue 29): a JVM started with no flag at
all (Debian's OpenJDK 17) runs the JDK's HttpServer -- its dispatcher
thread is a selector loop that runs the handlers itself -- and a plain NIO
selector loop on a thread named "nio-loop" (tests/apps/java/LoopServer.java).
jankbpf, watching the command with --threads main, must watch those loop
threads (they wait in epoll; neither is the process's first thread), and
their slow handlers -- cold (interpreted), blocking in Thread.sleep, and
warm (JIT-compiled, a method inlined) -- must come out as janks of those
threads whose stacks and runnable_name name the Java methods with
File.java:line, read from HotSpot's own structures. A System.gc() on the
dispatcher is told as the JVM's pause (jvm_pause), G1's full collection.
One JVM run serves every test here (a JVM starts slowly)."""
import json
import os
import re
import shutil
import subprocess

import pytest

from harness import ROOT, need, run_jankbpf
from viewers import protoc_decode

IGNORE = "3"
JAVA, JAVAC = shutil.which("java"), shutil.which("javac")
SOURCE = os.path.join(ROOT, "tests", "apps", "java", "LoopServer.java")


def _require_java():
    need(JAVA and JAVAC, "java/javac not installed (openjdk-17-jdk-headless; scripts/install-test-deps.sh)")


def _line(needle):
    src = open(SOURCE).read()
    return src.count("\n", 0, src.index(needle)) + 1


def _lines_of(method_head):
    """The first and last line of a method whose declaration is `method_head`."""
    src = open(SOURCE).read().splitlines()
    first = next(i for i, l in enumerate(src) if method_head in l)
    depth, i = 0, first
    while True:
        depth += src[i].count("{") - src[i].count("}")
        if depth == 0 and i > first:
            return first + 1, i + 1
        i += 1


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    _require_java()
    tmp = tmp_path_factory.mktemp("java")
    classes = tmp / "classes"
    subprocess.run([JAVAC, "-g", "-d", str(classes), SOURCE], check=True, timeout=120)
    out = {"html": tmp / "r.html", "folded": tmp / "r.folded", "pf": tmp / "r.pftrace", "logs": tmp / "logs"}
    # Full GCs of a 300 MB live heap for at least 250 ms (one takes 80-320
    # ms here): the threshold is below it (the handlers hold their loops
    # 300 ms).
    rc, records, err = run_jankbpf("-v", "--ignore-startup-time", IGNORE, "--threshold", "100",
                                   "--log-type", "1", "--dev",
                                   "--report-times-per-app", "3", "--log-dir", str(out["logs"]),
                                   "--report", str(out["html"]), "--folded", str(out["folded"]),
                                   "--perfetto", str(out["pf"]),
                                   "--", JAVA, "-cp", str(classes), "LoopServer", "3500", "300", timeout=150)
    assert rc == 0, err[-4000:]
    truth = [json.loads(l) for l in err.splitlines() if l.startswith('{"what"')]
    assert [t["what"] for t in truth] == ["report", "nio-lookup", "nio-render", "report", "gc"], err[-4000:]
    return {**out, "records": records, "err": err, "truth": truth}


def _jank(run, k):
    """The one jank of the loop thread that held the k-th slow handler."""
    t = run["truth"][k]
    janks = [r for r in run["records"] if r.get("type") == "jank" and r["thread_name"] == t["thread"] and
             r["begin_monotonic_ns"] <= t["begin_ns"] and
             r["begin_monotonic_ns"] + r["duration_ms"] * 1e6 >= t["end_ns"]]
    assert len(janks) == 1, (t, [(r["thread_name"], r["duration_ms"], r["heaviest_stack"][:300])
                                 for r in run["records"] if r.get("type") == "jank"])
    return janks[0]


def _java(j):
    return [f for f in j["stack"] if f.get("runtime") == "java"]


def test_loop_threads_of_a_flagless_jvm_are_watched(run):
    assert re.search(r"pid \d+: a JVM: its threads that wait in epoll", run["err"]), run["err"][-3000:]
    assert re.search(r"pid \d+: /\S*/libjvm\.so: HotSpot 17\.\S*: reading Java frames", run["err"]), \
        run["err"][-3000:]
    janks = [r for r in run["records"] if r.get("type") == "jank"]
    pids = {r["pid"] for r in janks}
    assert len(pids) == 1
    # Loop threads, none of them the process's first thread.
    assert {r["thread_name"] for r in janks} >= {"HTTP-Dispatcher", "nio-loop"}
    assert all(r["tid"] != r["pid"] for r in janks)


def test_cold_http_handler_named_with_file_and_line(run):
    j = _jank(run, 0)
    frames = _java(j)
    first, last = _lines_of("static double render(long ms)")
    render = frames[0]
    assert render["symbol"] == "Handlers.render", (frames[:4], j["why"], j["heaviest_stack"][-3000:])
    f, line = render["file"].rsplit(":", 1)
    assert f == "LoopServer.java" and first <= int(line) <= last, render
    # Its callers, cold: run by the interpreter (no "jit"), each at its call's line.
    assert [x["symbol"] for x in frames[1:4]] == ["Handlers.report", "Handlers.serve",
                                                  "LoopServer$ReportHandler.handle"], frames[:6]
    assert frames[1]["file"] == f"LoopServer.java:{_line('return render(ms) + 1;')}"
    assert frames[2]["file"] == f"LoopServer.java:{_line('return report(ms) * 2;')}"
    assert frames[3]["file"] == f"LoopServer.java:{_line('double r = Handlers.serve(ms);')}"
    assert not any(x.get("jit") for x in frames[1:4]), frames[:6]
    # The JDK's HttpServer under them, to the dispatcher's Thread.run.
    names = [x["symbol"] for x in frames]
    assert "sun.net.httpserver.ServerImpl$Dispatcher.run" in names, names
    assert names[-1] == "java.lang.Thread.run", names
    assert frames[-1]["file"].startswith("Thread.java:")
    assert all(x["module_index"] == -1 for x in frames)
    assert j["runnable_name"] == "Handlers.render", j["runnable_name"]
    text = j["heaviest_stack"]
    assert re.search(r"at Handlers\.render\(LoopServer\.java:\d+\)$", text, re.M), text
    assert "[java: unreadable]" not in text, text


def test_warm_http_handler_compiled_with_an_inlined_method(run):
    j = _jank(run, 3)
    frames = _java(j)
    assert [x["symbol"] for x in frames[:4]] == ["Handlers.render", "Handlers.report", "Handlers.serve",
                                                 "LoopServer$ReportHandler.handle"], frames[:6]
    # Compiled by now: render its own nmethod, report inlined into serve
    # (HotSpot's debug info at the call's return address says so).
    assert frames[0].get("jit") and frames[1].get("jit") and frames[2].get("jit"), frames[:4]
    assert frames[1].get("inlined") and not frames[2].get("inlined"), frames[:4]
    assert frames[1]["file"] == f"LoopServer.java:{_line('return render(ms) + 1;')}"
    assert frames[2]["file"] == f"LoopServer.java:{_line('return report(ms) * 2;')}"
    assert j["runnable_name"] == "Handlers.render"


def test_nio_loop_handlers_on_and_off_the_cpu(run):
    lookup, render = _jank(run, 1), _jank(run, 2)
    serve = "LoopServer.java:%d" % _line('if (w[0].equals("lookup")) Handlers.lookup(ms);')
    # Blocked in Thread.sleep: an off-CPU stack, its Java frames from the
    # thread's last Java frame, the native method as Java prints it.
    f = _java(lookup)
    assert [x["symbol"] for x in f[:4]] == ["java.lang.Thread.sleep", "Handlers.lookup",
                                            "LoopServer$NioLoop.serve", "LoopServer$NioLoop.run"], f[:5]
    assert f[0]["file"] == "Native Method"
    assert f[2]["file"] == serve
    assert "at java.lang.Thread.sleep(Native Method)" in lookup["heaviest_stack"]
    assert re.search(r"JVM_Sleep", lookup["heaviest_stack"]), lookup["heaviest_stack"]
    # Interpreted frames keep the frame pointer chain: the native walk goes
    # on where the call stub returns, to the C++ that started the thread.
    assert re.search(r"at java\.lang\.Thread\.run\(Thread\.java:\d+\)\n#\d+ pc \w+ \S*libjvm\.so\(JavaCalls::call_helper",
                     lookup["heaviest_stack"]), lookup["heaviest_stack"]
    assert lookup["runnable_name"] == "Handlers.lookup"  # past the JDK's Thread.sleep
    f = _java(render)
    assert [x["symbol"] for x in f[:2]] == ["Handlers.render", "LoopServer$NioLoop.serve"], f[:4]
    assert render["runnable_name"] == "Handlers.render"
    assert render["thread_name"] == "nio-loop"


def test_gc_pause_on_the_loop_thread_is_told_as_the_jvms(run):
    j = _jank(run, 4)
    p = j.get("jvm_pause")
    assert p, j["heaviest_stack"]
    assert p["kind"] == "gc" and p["operation"] == "G1CollectFull", p
    # Most of the task, not a sliver of it.
    assert p["ms"] >= j["duration_ms"] * 0.5, (p, j["duration_ms"])
    # ... and `why` says it first, not the lock the JVM held the thread on.
    assert re.match(r"\d+ ms stopped by its JVM for a garbage collection \(G1CollectFull\)", j["why"]), j["why"]
    names = [x["symbol"] for x in _java(j)]
    assert names[:3] == ["java.lang.Runtime.gc", "java.lang.System.gc", "Handlers.collect"], names
    assert j["runnable_name"] == "Handlers.collect"
    # The handlers' own janks: a pause the JVM took meanwhile (a young GC
    # while the cold handler loads classes) may be told, never as most of
    # the task.
    for other in (0, 1, 2, 3):
        o = _jank(run, other)
        assert o.get("jvm_pause", {"ms": 0})["ms"] < o["duration_ms"] * 0.5, (other, o.get("jvm_pause"))


def test_stack_logs_and_renderers_print_java_frames_as_java_does(run):
    here = re.compile(r"at Handlers\.render\(LoopServer\.java:\d+\)")
    logs = [p for r in run["records"] if r.get("type") == "jank" for p in r.get("external_log", [])
            if "/stack-" in p]
    assert logs
    assert any(re.search(r"^\s*\d+ #\d+ " + here.pattern + "$", open(p).read(), re.M) for p in logs)
    folded = open(run["folded"]).read()
    assert re.search(r";at LoopServer\$ReportHandler\.handle\(LoopServer\.java:\d+\);at Handlers\.serve\(", folded)
    assert here.search(open(run["html"]).read())
    assert here.search(protoc_decode(run["pf"]))
    summary = [r for r in run["records"] if r.get("type") == "summary"][0]
    rf = summary["runtime_frames"]
    assert rf["read"] > 100, rf
    # A read after its task ended or of another moment is refused: few.
    assert rf["unreadable"] <= rf["read"] // 20, rf
