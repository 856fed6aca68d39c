"""Quick checks of what the package installs, without building it: the
systemd unit verifies and scores <= 4.0 offline (systemd is not PID 1 on
the test machines), the logrotate snippet parses, the man page renders
without warnings."""
import os
import re
import subprocess

from conftest import BUILD, ROOT, cannot_run, need_tool

UNIT = os.path.join(ROOT, "debian", "jankbpf.service")
MAX_EXPOSURE = 4.0


def unit_for_this_build(tmp_path):
    """The unit with ExecStart pointing at this build's binary: verify checks
    that the command exists and is executable."""
    binary = os.path.join(BUILD, "jankbpf")
    if not os.access(binary, os.X_OK):
        cannot_run(f"{binary} is not built (make)")
    text = open(UNIT).read()
    assert "ExecStart=/usr/sbin/jankbpf " in text
    path = tmp_path / "jankbpf.service"
    path.write_text(text.replace("ExecStart=/usr/sbin/jankbpf ", f"ExecStart={binary} "))
    return path


def test_unit_verifies_clean(tmp_path):
    analyze = need_tool("systemd-analyze", "systemd")
    unit = unit_for_this_build(tmp_path)
    # --man=no: the man page is installed by the package, checked below.
    p = subprocess.run([analyze, "verify", "--man=no", str(unit)], capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr.strip() == "", p.stderr


def test_unit_exposure_at_most_4(tmp_path):
    analyze = need_tool("systemd-analyze", "systemd")
    unit = unit_for_this_build(tmp_path)
    p = subprocess.run([analyze, "security", "--offline=true", "--threshold=40", str(unit)],
                       capture_output=True, text=True)
    m = re.search(r"Overall exposure level for jankbpf.service: (\d+\.\d+)", p.stdout)
    assert m, p.stdout + p.stderr
    print(f"exposure {m.group(1)}")
    assert float(m.group(1)) <= MAX_EXPOSURE, p.stdout


def test_unit_keeps_the_promised_hardening():
    """What README promises, line by line; the capability set is exactly the
    justified one (a capability added without a comment fails here)."""
    text = open(UNIT).read()
    settings = dict(re.findall(r"^(\w+)=(.*)$", text, re.M))
    for key, want in {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "read-only",
                      "PrivateTmp": "yes", "Restart": "on-failure", "LogsDirectory": "jankbpf"}.items():
        assert settings.get(key) == want, key
    caps = settings["CapabilityBoundingSet"].split()
    assert "CAP_SYS_ADMIN" not in caps
    for cap in caps:
        assert re.search(rf"^#\s+{cap}\s+\S", text, re.M), f"{cap} has no comment saying why"
    assert "--output /var/log/jankbpf/janks.jsonl" in settings["ExecStart"]
    assert "--config /etc/jankbpf/config.json" in settings["ExecStart"]
    assert "EnvironmentFile=-/etc/default/jankbpf" in text


def test_logrotate_snippet_parses(tmp_path):
    logrotate = need_tool("logrotate", "logrotate")
    p = subprocess.run([logrotate, "-d", "-s", str(tmp_path / "state"),
                        os.path.join(ROOT, "debian", "jankbpf.logrotate")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "error" not in p.stderr.lower(), p.stderr


def test_man_page_renders_without_warnings():
    man = need_tool("man", "man-db")
    env = {**os.environ, "LC_ALL": "C.UTF-8", "MANWIDTH": "80"}
    p = subprocess.run([man, "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z",
                        os.path.join(ROOT, "doc", "jankbpf.8")],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0 and p.stderr == "", p.stderr


def test_unit_bounds_memory_and_cpu_and_allows_the_priority_calls():
    """Issue 26: the host's memory and CPU are bounded for jankbpf and its
    children, with the figures explained; and the syscall filter lets the
    reporter and report threads lower their priority (setpriority), which
    "~@resources" denied."""
    text = open(UNIT).read()
    settings = dict(re.findall(r"^(\w+)=(.*)$", text, re.M))
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    size = lambda v: int(v[:-1]) * units[v[-1]] if v[-1] in units else int(v)
    high, top = size(settings["MemoryHigh"]), size(settings["MemoryMax"])
    measured_peak = 582 << 20  # bench/service_footprint.py, in the unit's comment
    assert measured_peak < high < top, (high, top)
    assert "582 MiB" in text and "bench/service_footprint.py" in text
    quota = int(settings["CPUQuota"].rstrip("%"))
    assert 25 < quota <= 100  # over the busiest second measured, under one CPU
    denied = set()
    for line in re.findall(r"^SystemCallFilter=~(.*)$", text, re.M):
        denied |= set(line.split())
    assert "@resources" not in denied and "setpriority" not in denied, denied
    assert {"sched_setscheduler", "sched_setattr", "setrlimit"} <= denied
