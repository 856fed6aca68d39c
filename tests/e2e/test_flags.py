"""End-to-end tests of usage-table flags no other test exercises: what each
one changes, seen from outside. --stack-size (a stack deeper than the
default 16 KB copy reaches main only with a larger one), --sample-interval
and --sample-count (stacks only inside the seed's window, threshold + count
x interval into the task), -d, --version, and --hooks trampoline where the
kernel has no trampolines (a clear message, exit 1)."""
import os
import re
import signal
import subprocess
import time

import pytest

from harness import BUILD, JANKBPF, ROOT, Jankbpf, run_jankbpf

DEEP_STACK = os.path.join(BUILD, "tests", "deep_stack")
STACK_LOOP = os.path.join(BUILD, "tests", "stack_loop")
IGNORE = "3"
NICE = ["nice", "-n", "-20"]  # keep the CPU while other sessions load the machine


def the_jank(records):
    janks = [r for r in records if r.get("type") == "jank"]
    assert len(janks) == 1, [(j["duration_ms"], j["samples"]) for j in janks]
    return janks[0]


def stack_log(j):
    logs = [p for p in j["external_log"] if os.path.basename(p).startswith("stack-")]
    assert len(logs) == 1, j["external_log"]
    return open(logs[0]).read()


def through(log, symbol):
    """Samples whose path passes through `symbol`, a function that is not
    recursive: each path holds it once, so the counts of its lines add up
    (the seed's format: COUNT #LEVEL pc PC PATH(SYMBOL+OFF)(BUILD_ID))."""
    return sum(int(m.group(1)) for m in re.finditer(r"^\s*(\d+) #\d+ pc \S+ \S+\(" + re.escape(symbol) + r"\+",
                                                    log, re.M))


def paths(log):
    """The log's tree as (samples, [frame text, root first]) per distinct
    path: a line's samples less its children's end there."""
    out, stack = [], []  # stack: [level, count, text, children's count]

    def close(to_level):
        while stack and stack[-1][0] >= to_level:
            level, count, _, kids = stack[-1]
            if count > kids:
                out.append((count - kids, [t for _, _, t, _ in stack]))
            stack.pop()
    for m in re.finditer(r"^\s*(\d+) #(\d+) (.*)$", log, re.M):
        count, level, text = int(m.group(1)), int(m.group(2)), m.group(3)
        close(level)
        if stack:
            stack[-1][3] += count
        stack.append([level, count, text, 0])
    close(0)
    return out


def symbols(frames):
    return [m.group(1) for f in frames for m in [re.search(r"\(([^()+]+?)\+\d+\)", f)] if m]


def at_the_bottom(log):
    """The on-CPU samples taken in spin_at_bottom (not off-CPU captures:
    those copy 16 KB whatever --stack-size says), as lists of symbols."""
    return [symbols(frames) for n, frames in paths(log) for _ in range(n)
            if not frames[-1].startswith("wait") and "spin_at_bottom" in symbols(frames)]


# ---- --stack-size ---------------------------------------------------------------

def run_deep(tmp_path, *extra):
    rc, records, err = run_jankbpf("--ignore-startup-time", IGNORE, "--log-type", "1",
                                   "--log-dir", str(tmp_path), *extra,
                                   "--", *NICE, DEEP_STACK, "3.3", "400", "16")
    assert rc == 0, err
    j = the_jank(records)
    return j, stack_log(j)


def test_stack_size_a_larger_copy_reaches_main_through_a_deep_stack(tmp_path):
    # deep_stack spins under 16 frames of ~2 KB each: ~33 KB from the spin
    # up to main (a sample during the descent, shallower, may reach main
    # with any copy: only the samples at the bottom count).
    depth, frame = 16, 2048
    assert depth * frame > 16384
    j, log = run_deep(tmp_path / "default")
    bottom = at_the_bottom(log)
    assert len(bottom) >= 10, log[:3000]
    # The default 16 KB copy: unwinding goes as far as the copy holds,
    # never to main.
    assert all("deep_frame" in p and "main" not in p for p in bottom), log[:3000]

    # The largest copy the flag allows: every one reaches main, through all
    # 16 levels.
    j, log = run_deep(tmp_path / "big", "--stack-size", "65528")
    bottom = at_the_bottom(log)
    assert len(bottom) >= 10, log[:3000]
    want = ["_start", "__libc_start_main", "__libc_start_call_main", "main"] + ["deep_frame"] * depth
    assert all(p[:len(want) + 1] == want + ["spin_at_bottom"] for p in bottom), (bottom[:2], log[:3000])


# ---- --sample-interval, --sample-count: the seed's window --------------------------

def run_ab(tmp_path, a_ms, b_ms, *extra):
    rc, records, err = run_jankbpf("--ignore-startup-time", IGNORE, "--log-type", "1",
                                   "--log-dir", str(tmp_path), *extra,
                                   "--", *NICE, STACK_LOOP, "3.3", f"ab:{a_ms}:{b_ms}")
    assert rc == 0, err
    j = the_jank(records)
    return j, stack_log(j)


@pytest.mark.parametrize("count,window_ms", [(1, 200), (6, 450)])
def test_samples_only_inside_threshold_plus_count_times_interval(tmp_path, count, window_ms):
    """Stacks are taken from a third of the threshold (50 ms) up to
    threshold + count x interval into the task, one per --sample-period
    (10 ms, less 10 % slack for the clock's jitter). phase_a spins the
    task's first 300 ms, phase_b its next 300: a window ending at 200 ms
    sees no phase_b; one ending at 450 ms sees phase_b only up to then, not
    its 300 ms (about 30 samples without the window)."""
    j, log = run_ab(tmp_path, 300, 300, "--threshold", "150", "--sample-interval", "50",
                    "--sample-count", str(count))
    assert window_ms == 150 + count * 50
    most = lambda ms: int(ms / 9) + 1  # noqa: E731  one per 9 ms (the period less its slack), and the first
    a, b = through(log, "phase_a"), through(log, "phase_b")
    assert a >= 5, log[:2000]
    assert a + b <= most(window_ms - 50) and j["samples"] <= most(window_ms - 50), (a, b, j["samples"])
    if window_ms <= 300:
        assert b == 0, log[:2000]
    else:
        assert 1 <= b <= most(window_ms - 300), (a, b)


# ---- -d, --version ------------------------------------------------------------------

def test_short_duration_flag_stops_after_that_long():
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        t0 = time.monotonic()
        jb = Jankbpf("-d", "1.5", "--pid", str(sleeper.pid))
        rc = jb.wait(30)  # stops by itself
        took = time.monotonic() - t0
        assert rc == 0, jb.stderr
        assert sleeper.poll() is None, "the target went away: that, not -d, may have stopped it"
    finally:
        sleeper.kill()
        sleeper.wait()
    s = jb.summary()
    # -d counts from the start (before the programs are attached); a timer
    # ends the run, so it ends within a second of the mark even on a loaded
    # machine.
    assert 1.5 <= s["elapsed_s"] < 2.5, s["elapsed_s"]
    assert took >= 1.5
    assert "detached" in jb.stderr


def test_version_names_the_commit_built_needs_no_privilege():
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
                        JANKBPF, "--version"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and p.stderr == "", p
    m = re.fullmatch(r"jankbpf ([0-9a-f]{7,40})(-dirty)?\n", p.stdout)
    assert m, p.stdout
    # The Makefile writes `git describe --always --dirty` of the tree it built.
    known = subprocess.run(["git", "-C", ROOT, "cat-file", "-e", m.group(1) + "^{commit}"])
    assert known.returncode == 0, f"{m.group(1)} is no commit of this repository"


# ---- --hooks trampoline without trampolines ---------------------------------------

NO_TRAMPOLINES = re.compile(r"--hooks trampoline: this kernel cannot attach BPF trampolines \(fentry/fexit\) "
                            r"\((.+)\); --hooks tracepoint hooks the waits with syscall tracepoints")


def kernel_has_trampolines():
    p = subprocess.run([JANKBPF, "--check"], capture_output=True, text=True, timeout=60)
    m = re.search(r"^trampolines\s+(yes|NO)\b", p.stdout, re.M)
    assert m, p.stdout
    return m.group(1) == "yes"


def test_forced_trampolines_where_there_are_none_say_so_and_exit_1():
    # Trampolines taken away (the test seam that makes a feature missing):
    # the same on every kernel.
    rc, records, err = run_jankbpf("--hooks", "trampoline", "-d", "1", env={"JANKBPF_DISABLE": "trampolines"})
    assert rc == 1 and records == [], err
    m = NO_TRAMPOLINES.search(err)
    assert m and m.group(1) == "disabled by JANKBPF_DISABLE", err
    assert "attached" not in err
    # This kernel's own answer: where it has none (this VM's), its reason;
    # where it has them, the run uses them.
    rc, records, err = run_jankbpf("--hooks", "trampoline", "-d", "1")
    if kernel_has_trampolines():
        assert rc == 0, err
        assert [r for r in records if r["type"] == "summary"][0]["hooks"] == "trampoline"
    else:
        assert rc == 1 and records == [], err
        m = NO_TRAMPOLINES.search(err)
        assert m and "fentry" in m.group(1), err
    # --check says the same, and that the programs do not load.
    p = subprocess.run([JANKBPF, "--check", "--hooks", "trampoline"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "JANKBPF_DISABLE": "trampolines"})
    assert p.returncode == 1, p
    assert re.search(r"^bpf_programs\s+NO\s+--hooks trampoline: this kernel cannot attach", p.stdout, re.M), p.stdout
