"""--metrics against an unprivileged attacker (uid 65534), as issue 26
found it, with a real Prometheus (Debian's prometheus) scraping jankbpf:

* a process named "\\xff\\xfe-jank" (not UTF-8) must not make scrapes
  invalid: the target stays up and the name arrives as U+FFFD;
* a user who binds the metrics port first must not turn detection off;
* idle and trickling connections must not starve the scrapes;
* 550 made-up process names must not push a real app into "other".
"""
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from harness import Jankbpf
from test_metrics import Prometheus, free_port, metrics_url, need, redis, wait_http  # noqa: F401 (fixture)
import target as target_mod

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
WEIRD = b"\xff\xfe-jank"
REPLACED = "\ufffd\ufffd-jank"

# An attacker's script: holds N idle and N trickling connections to
# HOST:PORT, reconnecting whenever one is dropped, until killed.
HOLDER = r"""
import socket, sys, threading, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def hold(trickle):
    while True:
        try:
            s = socket.create_connection((host, port), timeout=5)
            if trickle:
                s.sendall(b"GET /metrics HTTP/1.0\r\nX-a: ")
            s.settimeout(0.5)
            while True:
                if trickle:
                    s.sendall(b"a")
                try:
                    if s.recv(1) == b"":
                        break
                except socket.timeout:
                    pass
        except OSError:
            time.sleep(0.05)
for i in range(n):
    for trickle in (False, True):
        threading.Thread(target=hold, args=(trickle,), daemon=True).start()
print("holding", flush=True)
time.sleep(3600)
"""


def attacker_dir():
    d = tempfile.mkdtemp(prefix="jankbpf-attacker-")
    os.chmod(d, 0o755)
    return d


def as_nobody(argv, **kw):
    return subprocess.Popen([*NOBODY, *argv], **kw)


def test_a_name_that_is_not_utf8_keeps_the_prometheus_target_up(tmp_path):
    prometheus_bin = need("prometheus", "prometheus")
    # Three janks once Prometheus is up, then 9 s more of short tasks.
    argv = target_mod.command("sleep:250x3,short:1x30", start_delay=8, gap_ms=300)
    attacker = as_nobody([*argv, "--name", WEIRD], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    jb = Jankbpf("--pid", str(attacker.pid), "--metrics", "127.0.0.1:0", "--ignore-startup-time", "3",
                 "--log-type", "1")
    prom = Prometheus(prometheus_bin, tmp_path, metrics_url(jb).split("/")[2])
    try:
        assert prom.wait_value('up{job="jankbpf"}', 1.0) == 1.0, [t["lastError"] for t in prom.targets()]
        deadline = time.monotonic() + 20
        while len(jb.of_type("jank", attacker.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(jb.of_type("jank", attacker.pid)) == 3, jb.stderr
        # The name arrives as U+FFFD (as in the JSON records), counted; the
        # target stays up for every scrape after the janks. (This
        # Prometheus's PromQL refuses U+FFFD in a string literal: a regex
        # finds the series, its labels are compared here.)
        # (Summed over the cause label: one series per name.)
        expr = 'sum by (comm) (jankbpf_janks_total{job="jankbpf",comm=~".+-jank"})'
        deadline = time.monotonic() + 20
        series = []
        while time.monotonic() < deadline:
            series = prom.query(expr)
            if series and series[0]["value"][1] == "3":
                break
            time.sleep(0.5)
        time.sleep(3)
        targets = prom.targets()
        print("series:", series, "target:", targets[0]["health"], repr(targets[0]["lastError"]))
        assert [s["metric"]["comm"] for s in series] == [REPLACED], series
        assert series[0]["value"][1] == "3"
        assert targets[0]["health"] == "up" and targets[0]["lastError"] == "", targets
        assert prom.value('min_over_time(up{job="jankbpf"}[3s])') == 1.0
    finally:
        prom.stop()
        attacker.kill()
        attacker.wait()
    assert jb.stop() == 0


def test_a_port_another_user_holds_does_not_stop_detection(tmp_path):
    port = free_port()
    # uid 65534 takes the port first (and would serve what it likes there).
    squat = as_nobody([sys.executable, "-c",
                       "import socket,sys,time; s=socket.socket(); "
                       "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
                       f"s.bind(('127.0.0.1',{port})); s.listen(); print('bound', flush=True); time.sleep(3600)"],
                      stdout=subprocess.PIPE, text=True)
    assert squat.stdout.readline().strip() == "bound"
    argv = target_mod.command("sleep:250x2,short:1x100", start_delay=3.5, gap_ms=300)
    with subprocess.Popen(argv, stdout=subprocess.DEVNULL) as t:
        jb = Jankbpf("--pid", str(t.pid), "--metrics", f"127.0.0.1:{port}", "--ignore-startup-time", "3",
                     "--log-type", "1")
        try:
            deadline = time.monotonic() + 20
            while len(jb.of_type("jank", t.pid)) < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert len(jb.of_type("jank", t.pid)) == 2, jb.stderr
            assert f"--metrics 127.0.0.1:{port}: cannot bind" in jb.stderr
            assert "detection runs on" in jb.stderr
            # The squatter leaves: jankbpf takes the port within its retry.
            squat.kill()
            squat.wait()
            assert jb.wait_stderr("bound after retrying", timeout=15), jb.stderr
            body = wait_http(f"http://127.0.0.1:{port}/metrics", timeout=5)
            assert "jankbpf_janks_total{" in body
        finally:
            if squat.poll() is None:
                squat.kill()
                squat.wait()
            t.kill()
        assert jb.stop() == 0


def test_idle_and_trickling_clients_do_not_starve_prometheus(tmp_path):
    prometheus_bin = need("prometheus", "prometheus")
    jb = Jankbpf("--pid", str(os.getpid()), "--metrics", "127.0.0.1:0", "--ignore-startup-time", "3")
    target = metrics_url(jb).split("/")[2]
    host, port = target.split(":")
    prom = Prometheus(prometheus_bin, tmp_path, target)
    script = os.path.join(attacker_dir(), "holder.py")
    with open(script, "w") as f:
        f.write(HOLDER)
    os.chmod(script, 0o644)
    # 100 idle and 100 trickling connections, well past the 64 the server keeps.
    holder = as_nobody([sys.executable, script, host, port, "100"], stdout=subprocess.PIPE, text=True)
    try:
        assert prom.wait_value('up{job="jankbpf"}', 1.0) == 1.0
        assert holder.stdout.readline().strip() == "holding"
        time.sleep(12)
        scrapes = prom.value('count_over_time(up{job="jankbpf"}[10s])')
        up = prom.value('min_over_time(up{job="jankbpf"}[10s])')
        duration = prom.value('max_over_time(scrape_duration_seconds{job="jankbpf"}[10s])')
        print(f"under 200 hostile connections: {scrapes} scrapes in 10 s, min(up) {up}, "
              f"longest scrape {duration:.3f} s")
        assert scrapes >= 8 and up == 1.0, prom.targets()
    finally:
        holder.kill()
        holder.wait()
        prom.stop()
    assert jb.stop() == 0


def test_made_up_names_do_not_push_a_real_app_into_other(tmp_path, redis):
    """550 processes of uid 65534, each with a name of its own and one
    jank, fill the 500 label sets; redis-server (root) janks after that and
    must be counted under its own name. jankbpf watches every process, as
    the service does (other processes of the machine add their own sets)."""
    prometheus_bin = need("prometheus", "prometheus")
    proc, cli = redis
    jb = Jankbpf("--metrics", "127.0.0.1:0", "--ignore-startup-time", "3", "--log-type", "1",
                 "--output", str(tmp_path / "janks.jsonl"))
    url = metrics_url(jb)
    prom = Prometheus(prometheus_bin, tmp_path, url.split("/")[2])
    d = attacker_dir()
    spawner = os.path.join(d, "spawn.py")
    with open(spawner, "w") as f:
        f.write("import subprocess, sys\n"
                "argv = sys.argv[2:]\n"
                "ps = [subprocess.Popen(argv + ['--name', f'fake{i:03d}'], stdout=subprocess.DEVNULL)"
                " for i in range(int(sys.argv[1]))]\n"
                "print('spawned', flush=True)\n"
                "sys.exit(max(p.wait() for p in ps))\n")
    os.chmod(spawner, 0o644)
    argv = target_mod.command("sleep:200", start_delay=4, gap_ms=50)
    flood = as_nobody([sys.executable, spawner, "550", *argv], stdout=subprocess.PIPE, text=True)
    try:
        assert flood.stdout.readline().strip() == "spawned"
        assert flood.wait(60) == 0
        full = prom.wait_value("jankbpf_label_sets", 501.0, timeout=30)
        print("label sets after the flood:", full,
              "dropped:", prom.value("jankbpf_label_sets_dropped_total"))
        assert full == 501.0, "the flood did not fill the label-set cap"
        for _ in range(3):
            subprocess.run([*cli, "DEBUG", "SLEEP", "0.3"], check=True, capture_output=True)
            time.sleep(0.3)
        sel = '{job="jankbpf",comm="redis-server"}'
        got = prom.wait_value(f"sum(jankbpf_janks_total{sel})", 3.0)
        print("redis-server janks counted under its own name:", got,
              "evicted:", prom.value("jankbpf_label_sets_evicted_total"))
        assert got == 3.0
    finally:
        if flood.poll() is None:
            flood.kill()
        prom.stop()
    jb.stop()
