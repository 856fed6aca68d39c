"""Sections 7e and 7f (issue 29): the Java frame reader's cost per sample
(the unit binary's [hotspot-bench]), and a JVM started with no flag --
the JDK's HttpServer and an NIO loop, tests/apps/java/LoopServer.java --
watched with --threads main: which janks come, how their Java frames read
(named, unreadable, interpreted, compiled), and how many sampled stacks
reach the thread's first Java frame (Thread.run)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile

from .. import config
from ..config import UNIT
from ..procs import say
from .stacks import stack_log_share


def hotspot_reader(ctx) -> dict:
    """One sample's Java frames, read 5,000 times against a live JVM: a
    compiled leaf (registers), a thread in Thread.sleep (its anchor), -Xint."""
    say("7e. the Java frame reader")
    if not os.path.exists(UNIT):
        return {"error": f"{os.path.relpath(UNIT, config.ROOT)} not built"}
    r = subprocess.run([UNIT, "[hotspot-bench]"], capture_output=True, text=True, timeout=600, cwd=config.ROOT)
    out = {"commands": ['build/jankbpf-unit "[hotspot-bench]"']}
    for m in re.finditer(r"\[hotspot-bench(?::([\w-]+))?\] (\S+), (\d+) frames: runtime found in ([\d.]+) ms; "
                         r"cold first read ([\d.]+) us; warm p50 ([\d.]+) us, p99 ([\d.]+) us, max ([\d.]+) us; "
                         r"([\d.]+) reads per capture; (\d+) interpreted, (\d+) compiled, (\d+) unreadable",
                         r.stdout):
        out[m.group(1) or "compiled-leaf"] = {
            "java": m.group(2), "frames": int(m.group(3)), "find_ms": float(m.group(4)),
            "cold_us": float(m.group(5)), "p50_us": float(m.group(6)), "p99_us": float(m.group(7)),
            "max_us": float(m.group(8)), "reads": float(m.group(9)), "interpreted": int(m.group(10)),
            "compiled": int(m.group(11)), "unreadable": int(m.group(12))}
    if "compiled-leaf" not in out:
        out["error"] = (r.stdout + r.stderr)[-500:]
    return out


def _is_thread_run(frame: str) -> bool:
    return frame.startswith("at java.lang.Thread.run(")


def jvm(ctx) -> dict:
    """A flagless JVM's loop threads: LoopServer's scenario (cold and warm
    HTTP handlers, Thread.sleep and a CPU handler on the NIO loop, a
    System.gc() on the dispatcher) under jankbpf -- as in
    tests/e2e/test_java_frames.py."""
    say("7f. a JVM's loop threads, no flags")
    java, javac = shutil.which("java"), shutil.which("javac")
    if not java or not javac:
        return {"error": "java/javac not installed (openjdk-17-jdk-headless)"}
    with tempfile.TemporaryDirectory(prefix="jankbench-java-") as tmp:
        src = os.path.join(config.ROOT, "tests", "apps", "java", "LoopServer.java")
        subprocess.run([javac, "-g", "-d", os.path.join(tmp, "classes"), src], check=True, timeout=120)
        logs = os.path.join(tmp, "logs")
        argv = [config.JANKBPF, "--ignore-startup-time", "3", "--threshold", "100", "--log-type", "1", "--dev",
                "--report-times-per-app", "3", "--log-dir", logs, "--", java, "-cp",
                os.path.join(tmp, "classes"), "LoopServer", "3500", "300"]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=180)
        records = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
        janks = [r for r in records if r.get("type") == "jank"]
        summary = next((r for r in records if r.get("type") == "summary"), {})
        shares = [stack_log_share(os.path.join(logs, f), _is_thread_run)
                  for f in (sorted(os.listdir(logs)) if os.path.isdir(logs) else []) if f.startswith("stack-")]
    res = {"rc": p.returncode, "janks": [], "runtime_frames": summary.get("runtime_frames", {}),
           "samples": summary.get("samples"), "log_samples": sum(x["samples"] for x in shares),
           "log_periods": sum(x["periods"] for x in shares), "to_thread_run": sum(x["reach"] for x in shares),
           "commands": ["javac -g -d DIR tests/apps/java/LoopServer.java",
                        " ".join(["build/jankbpf"] + argv[1:argv.index("--log-dir")] +
                                 ["--log-dir", "DIR", "--", "java", "-cp", "DIR", "LoopServer", "3500", "300"])]}
    for j in janks:
        java_frames = [f for f in j.get("stack", []) if f.get("runtime") == "java"]
        res["janks"].append({
            "thread": j["thread_name"], "ms": j["duration_ms"], "runnable_name": j.get("runnable_name", ""),
            "jvm_pause": j.get("jvm_pause"), "samples": j.get("samples"),
            "leaf": next((f"{f['symbol']}({f.get('file', '')})" for f in java_frames
                          if not f["symbol"].startswith("[")), ""),
            "java": len(java_frames), "jit": sum(1 for f in java_frames if f.get("jit")),
            "inlined": sum(1 for f in java_frames if f.get("inlined")),
            "unreadable": sum(1 for f in java_frames if f["symbol"] == "[java: unreadable]")})
    return res
