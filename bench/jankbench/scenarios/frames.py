"""Section 10: frames of Wayland clients (issue 28). What following a
client's frames costs, per frame and for a 60 Hz client: tests/apps/wayland/
wl_frames (shm, presentation feedback, a frame per callback) under weston's
headless backend, watched by `jankbpf --comm wl_frames` with `--frames on`
and `--frames off`, alternating (off on off on ...), five rounds. The uprobes' traps are
charged to the client (its CPU per frame, CLOCK_PROCESS_CPUTIME_ID over its
counted frames); jankbpf's own share is its CPU (every thread, schedstat)
over the same frames. One more run with kernel.bpf_stats_enabled gives each
frame program's hits per frame and average run time."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

from .. import config
from ..procs import Fatal, proc_cpu_ns, say, spawn, stop
from ..runner import Jankbpf

WL_FRAMES = os.path.join(config.BUILD, "tests", "wl_frames")


def _weston(runtime: str) -> subprocess.Popen:
    log = open(os.path.join(runtime, "weston.log"), "w")
    w = spawn(["weston", "--backend=headless-backend.so", "--socket=jb-bench", "--no-config", "--idle-time=0",
               "--width=320", "--height=240"], env={**os.environ, "XDG_RUNTIME_DIR": runtime},
              stdout=log, stderr=log)
    deadline = time.monotonic() + 20
    while not os.path.exists(os.path.join(runtime, "jb-bench")):
        if w.poll() is not None or time.monotonic() > deadline:
            raise Fatal("weston did not start: " + open(os.path.join(runtime, "weston.log")).read()[-1000:])
        time.sleep(0.05)
    return w


def _one(runtime: str, frames_on: bool, frames: int, stats: bool = False) -> dict:
    jb = Jankbpf("--comm", "wl_frames", "--ignore-startup-time", "3", "--frames", "on" if frames_on else "off")
    env = {**os.environ, "XDG_RUNTIME_DIR": runtime, "WAYLAND_DISPLAY": "jb-bench"}
    c = spawn([WL_FRAMES, "--warmup-ms", "3600", "--frames", str(frames)], env=env, stdout=subprocess.PIPE,
              stderr=subprocess.DEVNULL, text=True)
    jb_cpu0 = None
    done = None
    for line in c.stdout:
        if jb_cpu0 is None and '"frame":0,' in line:
            jb_cpu0 = proc_cpu_ns(jb.pid)  # the counted frames begin
        if line.startswith('{"done"'):
            done = json.loads(line)
            jb_cpu1 = proc_cpu_ns(jb.pid)
    c.wait(30)
    time.sleep(0.6)  # its last frames' drain (every 500 ms)
    summary = jb.finish()
    if not done or jb_cpu0 is None:
        raise Fatal("wl_frames did not finish its frames")
    row = next((r for r in summary.get("frames", []) if r["bundle_name"] == "wl_frames"), None)
    out = {"frames": frames, "client_cpu_ns": done["cpu_ns"], "wall_ns": done["wall_ns"],
           "jankbpf_cpu_ns": jb_cpu1 - jb_cpu0, "frames_seen": row["frames"] if row else 0,
           "janky": row["janky_frames"] if row else 0}
    if stats:
        out["bpf"] = {p["name"]: {"run_cnt": p["run_cnt"], "run_time_ns": p["run_time_ns"]}
                      for p in summary["bpf"] if p["name"].startswith(("jb_wl_", "jb_frame_"))}
    return out


def frames(ctx) -> dict:
    if not shutil.which("weston") or not os.path.exists(WL_FRAMES):
        raise Fatal("weston or build/tests/wl_frames is missing (scripts/install-test-deps.sh, make apps)")
    rounds = 1 if config.QUICK else 5
    n = 200 if config.QUICK else 400
    runtime = tempfile.mkdtemp(prefix="jb-bench-wayland-")
    os.chmod(runtime, 0o700)
    w = _weston(runtime)
    runs = {"off": [], "on": []}
    try:
        for i in range(rounds):
            for mode in ("off", "on"):
                say(f"frames: round {i + 1}/{rounds}, --frames {mode}")
                runs[mode].append(_one(runtime, mode == "on", n))
        with open("/proc/sys/kernel/bpf_stats_enabled") as f:
            was = f.read().strip()
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("1")
        try:
            say("frames: one more run with bpf_stats_enabled")
            stats = _one(runtime, True, n, stats=True)
        finally:
            with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
                f.write(was)
    finally:
        stop(w, signal.SIGTERM, 10)
        shutil.rmtree(runtime, ignore_errors=True)
    return {"rounds": rounds, "frames_per_run": n, "runs": runs, "stats": stats,
            "client": f"wl_frames --frames {n} (weston {_version()} headless)"}


def _version() -> str:
    try:
        out = subprocess.run(["weston", "--version"], capture_output=True, text=True, timeout=10).stdout
        return out.split()[-1] if out.strip() else "?"
    except (OSError, subprocess.SubprocessError):
        return "?"
