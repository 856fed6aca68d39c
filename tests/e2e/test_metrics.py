"""--metrics against a real Prometheus (Debian's prometheus package, run
directly with a temporary config and storage on 127.0.0.1) scraping a
jankbpf that watches a real redis-server made to block with DEBUG SLEEP.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from harness import Jankbpf, run_jankbpf

SLEEPS = 3
SLEEP_S = 0.3


def need(tool, package):
    path = shutil.which(tool)
    if path:
        return path
    why = f"{tool} is missing (Debian package {package}; scripts/install-deps.sh installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return r.read().decode()
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{url} did not answer in {timeout} s")


def metrics_url(jb):
    for line in jb.stderr_lines:
        m = re.search(r"metrics: (http://\S+/metrics)", line)
        if m:
            return m.group(1)
    raise AssertionError(f"no metrics line on stderr: {jb.stderr}")


class Prometheus:
    def __init__(self, binary, tmp, target):
        self.port = free_port()
        conf = tmp / "prometheus.yml"
        conf.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "scrape_configs:\n  - job_name: jankbpf\n"
            f"    static_configs:\n      - targets: ['{target}']\n")
        self.proc = subprocess.Popen(
            [binary, f"--config.file={conf}", f"--storage.tsdb.path={tmp / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL, stderr=open(tmp / "prometheus.log", "w"))
        wait_http(f"http://127.0.0.1:{self.port}/-/ready")

    def query(self, expr):
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def targets(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/targets", timeout=5) as r:
            return json.load(r)["data"]["activeTargets"]

    def value(self, expr):
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def wait_value(self, expr, want, timeout=20):
        deadline = time.monotonic() + timeout
        got = None
        while time.monotonic() < deadline:
            got = self.value(expr)
            if got == want:
                return got
            time.sleep(0.5)
        return got

    def stop(self):
        self.proc.terminate()
        self.proc.wait(15)


@pytest.fixture
def redis(tmp_path):
    server = need("redis-server", "redis-server")
    cli = need("redis-cli", "redis-tools")
    port = free_port()
    proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(tmp_path),
                             "--enable-debug-command", "local"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while subprocess.run([cli, "-p", str(port), "PING"], capture_output=True, text=True).stdout.strip() != "PONG":
        assert time.monotonic() < deadline, "redis-server did not start"
        time.sleep(0.1)
    yield proc, [cli, "-p", str(port)]
    proc.terminate()
    proc.wait(10)


def test_prometheus_counts_redis_debug_sleep_janks(tmp_path, redis):
    prometheus_bin = need("prometheus", "prometheus")
    proc, cli = redis
    jb = Jankbpf("--pid", str(proc.pid), "--metrics", "127.0.0.1:0", "--ignore-startup-time", "3",
                 "--log-type", "1")
    url = metrics_url(jb)
    prom = Prometheus(prometheus_bin, tmp_path, url.split("/")[2])
    try:
        # Scraped before any jank: up, and the process metrics are there.
        assert prom.wait_value('up{job="jankbpf"}', 1.0) == 1.0
        time.sleep(3.5)  # the startup grace (--ignore-startup-time 3) counts from redis's start
        for _ in range(SLEEPS):
            subprocess.run([*cli, "DEBUG", "SLEEP", str(SLEEP_S)], check=True, capture_output=True)
            time.sleep(0.3)
        deadline = time.monotonic() + 10
        while len(jb.of_type("jank", proc.pid)) < SLEEPS and time.monotonic() < deadline:
            time.sleep(0.1)
        janks = jb.of_type("jank", proc.pid)
        assert len(janks) == SLEEPS, jb.stderr

        sel = '{job="jankbpf",comm="redis-server"}'
        got = prom.wait_value(f"sum(jankbpf_janks_total{sel})", float(SLEEPS))
        print(f"prometheus: sum(jankbpf_janks_total{sel}) = {got}")
        assert got == SLEEPS
        assert prom.value(f"sum(jankbpf_jank_duration_seconds_count{sel})") == SLEEPS
        # DEBUG SLEEP 0.3: each jank falls in le=0.45 and not in le=0.25.
        assert prom.value(f'sum(jankbpf_jank_duration_seconds_bucket{{job="jankbpf",comm="redis-server",le="0.25"}})') == 0
        assert prom.value(f'sum(jankbpf_jank_duration_seconds_bucket{{job="jankbpf",comm="redis-server",le="0.45"}})') == SLEEPS
        blocked = prom.value(f"sum(jankbpf_main_thread_blocked_seconds_total{sel})")
        # The records round each duration to the µs; the counter does not.
        assert abs(blocked - sum(j["duration_ms"] for j in janks) / 1000) < SLEEPS * 1e-6
        assert prom.value(f"sum(jankbpf_hangs_total{sel})") == 0
        # The cause label: DEBUG SLEEP sleeps in nanosleep, each jank's largest
        # cause is a `sleep`, and the label is one of the fixed kinds only.
        assert all(j["cause"][0]["kind"] == "sleep" for j in janks), [j.get("cause") for j in janks]
        assert prom.value(f'sum(jankbpf_janks_total{{job="jankbpf",comm="redis-server",cause="sleep"}})') == SLEEPS
        kinds = {"throttled", "reclaim", "compaction", "fault", "io", "kernel_lock", "lock", "peer", "runnable",
                 "sleep", "other", "none"}
        assert {s["metric"]["cause"] for s in prom.query('jankbpf_janks_total{job="jankbpf"}')} <= kinds
        assert prom.value('jankbpf_lost_events_total{job="jankbpf"}') == 0
        assert prom.value('jankbpf_resident_memory_bytes{job="jankbpf"}') > 0
        assert prom.value('sum(jankbpf_cpu_seconds_total{job="jankbpf"})') > 0
        assert prom.value('jankbpf_tasks_checked_total{job="jankbpf"}') >= SLEEPS
        # The exe label is the file the kernel runs; never a pid label.
        series = prom.query(f"jankbpf_janks_total{sel}")
        assert series[0]["metric"]["exe"] == janks[0]["exe"]
        assert not prom.query('{job="jankbpf",pid!=""}')
    finally:
        prom.stop()
    assert jb.stop() == 0


def test_a_slow_client_does_not_stop_scrapes_and_big_requests_are_refused():
    jb = Jankbpf("--pid", str(os.getpid()), "--metrics", "127.0.0.1:0", "--ignore-startup-time", "3")
    host, port = metrics_url(jb).split("/")[2].split(":")
    silent = socket.create_connection((host, int(port)))  # connects, never sends
    try:
        t0 = time.monotonic()
        body = wait_http(metrics_url(jb), timeout=10)
        waited = time.monotonic() - t0
        assert "jankbpf_janks_total" in body or "# TYPE jankbpf_janks_total counter" in body
        assert waited < 4.5, f"a silent client held the server for {waited:.1f} s"
        with socket.create_connection((host, int(port))) as big:
            big.sendall(b"GET /metrics HTTP/1.0\r\nX: " + b"a" * 10000 + b"\r\n\r\n")
            assert big.recv(100).startswith(b"HTTP/1.0 431")
    finally:
        silent.close()
    assert jb.stop() == 0


def test_bad_metrics_address_is_a_usage_error():
    for bad in ("nope", "127.0.0.1:99999", "example.com:80"):
        rc, _, err = run_jankbpf("--metrics", bad, "--duration", "1")
        assert rc == 2, (bad, err)
        assert "allowed: PORT" in err


def test_taken_metrics_port_is_an_error_and_the_run_goes_on():
    """Any local user can bind a port first: that must not turn detection
    off (test_metrics_hostile.py has the attacker's version)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        rc, records, err = run_jankbpf("--metrics", f"127.0.0.1:{port}", "--duration", "1")
    assert rc == 0, err
    assert f"--metrics 127.0.0.1:{port}: cannot bind" in err
    assert "detection runs on" in err
    assert records and records[-1]["type"] == "summary"
