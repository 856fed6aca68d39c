"""scripts/run-suites.sh, the two lanes of `make test`, against a stand-in
for make (MAKE=) that records how each goal was run: pure, seconds."""
import os
import re
import subprocess
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "run-suites.sh")

# okN sleeps N tenths of a second and passes, failN the same and exits 3;
# each prints its nice value, session id and the MAKEFLAGS it was given.
FAKE_MAKE = r"""#!/bin/bash
g=${@: -1}
echo "goal=$g nice=$(nice) sid=$(ps -o sid= $$ | tr -d ' ') flags=[$MAKEFLAGS]"
n=${g#ok}; n=${n#fail}
sleep "$((n / 10)).$((n % 10))"
case $g in fail*) exit 3 ;; esac
"""


@pytest.fixture
def fake_make(tmp_path, monkeypatch):
    monkeypatch.setenv("SUITE_LOG_DIR", str(tmp_path / "logs"))
    path = tmp_path / "make"
    path.write_text(FAKE_MAKE)
    path.chmod(0o755)
    return str(path)


def run(fake_make, front, back, flags=""):
    env = {**os.environ, "MAKE": fake_make, "MAKEFLAGS": flags}
    t0 = time.monotonic()
    p = subprocess.run([SCRIPT, front, back], capture_output=True, text=True, env=env, timeout=60)
    return p.returncode, p.stdout + p.stderr, time.monotonic() - t0


def goal_lines(out):
    return {m.group(1): dict(kv.split("=", 1) for kv in m.group(0).split()[:3])
            for m in re.finditer(r"^goal=(\S+) nice=\S+ sid=\S+", out, re.M)}


def test_both_lanes_pass_and_run_at_once(fake_make):
    rc, out, secs = run(fake_make, "ok20 ok2", "ok10 ok1", flags=" -j2 --jobserver-auth=3,4 -- ARCH=x86")
    assert rc == 0, out
    # At once: 2.2 s of front beside 1.1 s of back, not 3.3 s in a row.
    assert secs < 3.2, (secs, out)
    seen = goal_lines(out)
    assert set(seen) == {"ok20", "ok2", "ok10", "ok1"}, out
    # The back lane: nice 19, a session of its own; the front: as called.
    assert seen["ok10"]["nice"] == "19" and seen["ok1"]["nice"] == "19", out
    assert seen["ok20"]["nice"] != "19", out
    assert seen["ok10"]["sid"] != seen["ok20"]["sid"], out
    # No jobserver handed down: each lane's make picks its own -j.
    assert "jobserver" not in out and "-j2" not in out and "ARCH=x86" in out, out
    for g in ("ok20", "ok2", "ok10", "ok1"):
        assert re.search(rf"^test: {g} took \d+ s", out, re.M), (g, out)
    # The back lane's logs come after the front's output, whole.
    assert out.index("===== ok10 ") > out.index("test: ok2 took"), out


def test_a_back_failure_fails_and_stops_its_lane(fake_make):
    rc, out, _ = run(fake_make, "ok1", "fail0 ok0")
    assert rc == 1, out
    assert re.search(r"^test: fail0 FAILED \(exit 3", out, re.M), out
    assert "goal=ok0" not in out, out


def test_a_front_failure_stops_the_back_lane(fake_make):
    rc, out, secs = run(fake_make, "fail0 ok0", "ok200")
    assert rc == 1, out
    assert secs < 10, (secs, out)
    assert "test: fail0 FAILED" in out and "goal=ok0" not in out, out


@pytest.mark.parametrize("front,back,why", [
    ("ok0", "ok0", "named twice"),
    ("ok0 x;rm", "", "not a make goal name"),
    ("../e2e", "", "not a make goal name"),
])
def test_bad_goals_are_refused(fake_make, front, back, why):
    rc, out, _ = run(fake_make, front, back)
    assert rc == 2 and why in out and "goal=" not in out, out
