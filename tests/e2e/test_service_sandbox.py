"""jankbpf inside the packaged unit's sandbox, as far as it can be built
without systemd as PID 1: exactly the unit's CapabilityBoundingSet (via
setpriv), NoNewPrivileges, and its SystemCallFilter compiled to seccomp
(the groups expanded by systemd-analyze itself). A real run must still
find janks with named kernel frames, the binary's identity, and a trace --
saved as text, because CAP_SYS_ADMIN (trace-cmd's private mount namespace)
is deliberately not given.
"""
import json
import os
import re
import shutil
import subprocess
import time

import pytest

from harness import JANKBPF, ROOT, _with_log_dir
import target as target_mod

UNIT = os.path.join(ROOT, "debian", "jankbpf.service")


def need(what, ok, package):
    if ok:
        return
    why = f"{what} is missing (Debian package {package}; scripts/install-deps.sh installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


def unit_settings():
    settings = {}
    for key, value in re.findall(r"^(\w+)=(.*)$", open(UNIT).read(), re.M):
        settings.setdefault(key, []).append(value)
    return settings


def expand(names, analyze, seen=None):
    """Syscall names of a filter list (@groups expanded, as systemd does)."""
    seen = set() if seen is None else seen
    out = set()
    for name in names:
        if not name.startswith("@"):
            out.add(name)
            continue
        if name in seen:
            continue
        seen.add(name)
        text = subprocess.run([analyze, "syscall-filter", name], capture_output=True, text=True,
                              check=True).stdout
        members = [l.strip() for l in text.splitlines()[1:]
                   if l.strip() and not l.strip().startswith("#")]
        out |= expand(members, analyze, seen)
    return out


def allowed_syscalls(settings, analyze):
    allow, deny = set(), set()
    for line in settings["SystemCallFilter"]:
        if line.startswith("~"):
            deny |= expand(line[1:].split(), analyze)
        else:
            allow |= expand(line.split(), analyze)
    return allow - deny


def sandbox_prefix():
    """(argv prefix, preexec_fn) that run a command as the unit would:
    its capability bounding set, no new privileges, its syscall filter."""
    setpriv = shutil.which("setpriv")
    analyze = shutil.which("systemd-analyze")
    need("setpriv", setpriv, "util-linux")
    need("systemd-analyze", analyze, "systemd")
    try:
        import seccomp
    except ImportError:
        seccomp = None
    need("python3 module seccomp", seccomp, "python3-seccomp")

    settings = unit_settings()
    # What this emulation does not model must not be in the unit: each of
    # these changes which capabilities root's uid ends up with.
    for unmodelled in ("User", "DynamicUser", "SecureBits", "PrivateUsers"):
        assert unmodelled not in settings, f"{unmodelled}= is not modelled here"
    assert settings.get("AmbientCapabilities", [""]) == [""]
    caps = settings["CapabilityBoundingSet"][0].split()
    assert settings["NoNewPrivileges"] == ["yes"]
    assert settings["SystemCallErrorNumber"] == ["EPERM"]
    syscalls = allowed_syscalls(settings, analyze)
    assert {"bpf", "perf_event_open"} <= syscalls

    def sandbox():
        f = seccomp.SyscallFilter(defaction=seccomp.ERRNO(1))  # EPERM, as the unit says
        for name in syscalls:
            try:
                f.add_rule(seccomp.ALLOW, name)
            except (RuntimeError, ValueError):
                pass  # not a syscall of this architecture
        f.load()

    bounding = "-all," + ",".join("+" + c.lower().removeprefix("cap_") for c in caps)
    return [setpriv, "--no-new-privs", "--bounding-set", bounding, "--inh-caps", "-all"], sandbox


def test_jankbpf_works_inside_the_units_sandbox(tmp_path):
    prefix, sandbox = sandbox_prefix()
    out = tmp_path / "janks.jsonl"
    argv = target_mod.command("spin:300,sleep:600", start_delay=3.5, truth=tmp_path / "truth.jsonl")
    cmd = [*prefix, JANKBPF, *_with_log_dir(["--output", str(out), "--ignore-startup-time", "3",
                                    "--trace-threshold", "500", "--", *argv])]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=90, preexec_fn=sandbox)
    assert p.returncode == 0, p.stderr
    records = [json.loads(l) for l in out.read_text().splitlines()]
    janks = [r for r in records if r["type"] == "jank"]
    assert len(janks) == 2, p.stderr

    for j in janks:
        # CAP_SYS_PTRACE (+ DAC_READ_SEARCH): who the process is.
        assert j["exe"].endswith("jank_target") and j["bundle_version"], j
    # In script order; a loaded machine may make the spin mostly runnable.
    spin, sleep = sorted(janks, key=lambda j: j["begin_monotonic_ns"])
    assert sleep["state_ms"]["sleeping"] > 500, sleep["state_ms"]
    # CAP_PERFMON: stacks sampled; CAP_SYSLOG: kernel frames have names.
    assert spin["samples"] > 0 and spin["stack"], spin
    kernel = [f for o in sleep["off_cpu"] for f in o["kernel_stack"]]
    assert any(f.startswith("schedule") or f.startswith("__schedule") for f in kernel), sleep["off_cpu"]
    # No CAP_SYS_ADMIN: the trace is the instance's text, and the record says why.
    assert any(l.endswith(".txt") or ".trace" in l or "trace-" in l for l in sleep["external_log"]), sleep
    assert "private mount namespace" in sleep.get("trace_note", ""), sleep
    summary = records[-1]
    assert summary["type"] == "summary" and summary["lost_events"] == 0


def thread_nices(pid):
    """nice of each thread of a process (field 19 of /proc/PID/task/TID/stat)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = open(f"/proc/{pid}/task/{tid}/stat").read()
        except OSError:
            continue
        out[int(tid)] = int(stat.rsplit(")", 1)[1].split()[16])
    return out


def test_the_units_filter_lets_jankbpf_yield_to_the_watched_apps(tmp_path):
    """The reporter and the report writer lower their own priority (nice
    10) so unwinding and rendering never take a CPU from the applications
    watched; "~@resources" made that setpriority fail (EPERM) silently."""
    prefix, sandbox = sandbox_prefix()
    cmd = [*prefix, JANKBPF, *_with_log_dir(["--pid", str(os.getpid()), "--duration", "6",
                                             "--report", str(tmp_path / "r.html"),
                                             "--output", str(tmp_path / "janks.jsonl")])]
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, preexec_fn=sandbox)
    try:
        nices = {}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and list(nices.values()).count(10) < 2 and p.poll() is None:
            time.sleep(0.2)
            nices = thread_nices(p.pid)
        print("threads' nice values:", sorted(nices.values()))
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    assert list(nices.values()).count(10) >= 2, (nices, err)  # the reporter and the report writer
    assert nices[p.pid] == 0  # the main thread (the ring-buffer reader) keeps its priority
    assert "cannot lower" not in err, err
