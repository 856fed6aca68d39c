"""scripts/fuzz.sh's FUZZ_WORKERS: a target as several libFuzzer processes
on its one corpus, against a stand-in fuzzer that prints libFuzzer's final
stats for the -runs it was given: pure, a few seconds (the generated large
inputs are made once, for the module)."""
import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "fuzz.sh")

# Runs as many "executions" as -runs says, at "that many per second"; the
# worker given FAKE_FAIL_RUNS executions fails as a crash does (exit 1), the
# one given FAKE_TIMEOUT_RUNS as libFuzzer's timeout does (an artifact
# timeout-*, exit 70). Run again on that artifact alone it passes, unless
# FAKE_REPLAY_HANGS=1.
FAKE_FUZZER = r"""#!/bin/bash
runs=0 prefix=
for a in "$@"; do
  case $a in
    -runs=*) runs=${a#-runs=} ;;
    -artifact_prefix=*) prefix=${a#-artifact_prefix=} ;;
    */timeout-*) [[ ${FAKE_REPLAY_HANGS:-0} != 1 ]] || exit 70 ;;
  esac
done
[[ $runs -gt 0 ]] || exit 0   # the generated large inputs, smoke, or a replay
echo "stat::number_of_executed_units: $runs"
echo "stat::average_exec_per_sec:     $runs"
[[ $runs != "${FAKE_FAIL_RUNS:-}" ]] || { echo "==1==ERROR: AddressSanitizer: fake"; exit 1; }
if [[ $runs == "${FAKE_TIMEOUT_RUNS:-}" ]]; then
  echo "==1== ERROR: libFuzzer: timeout after 13 seconds"
  echo slow > "${prefix}timeout-0123abcd"
  exit 70
fi
"""


@pytest.fixture(scope="module")
def fuzz_build(tmp_path_factory):
    out = tmp_path_factory.mktemp("fuzz")
    fake = out / "fuzz_fake"
    fake.write_text(FAKE_FUZZER)
    fake.chmod(0o755)
    return out


def run(out, workers, runs, **env):
    lines = out / "rows.jsonl"
    e = {**os.environ, "FUZZ_BUILD": str(out), "FUZZ_JSON": str(lines), "FUZZ_WORKERS": str(workers),
         "FUZZ_BENCH_RUNS": str(runs), **env}
    p = subprocess.run([SCRIPT, "bench", "fuzz_fake"], capture_output=True, text=True, env=e, timeout=120)
    rows = [json.loads(l) for l in lines.read_text().splitlines()] if lines.exists() else []
    return p.returncode, p.stdout + p.stderr, rows


def test_workers_share_the_executions_and_the_row_sums_them(fuzz_build):
    rc, out, rows = run(fuzz_build, 2, 1001)
    assert rc == 0, out
    assert len(rows) == 1, out
    r = rows[0]
    # 501 and 500: together exactly the executions asked for.
    assert r["executions"] == 1001 and r["exec_per_s"] == 1001, r
    assert r["workers"] == 2 and r["crashes"] == 0 and r["rc"] == 0, r
    log = (fuzz_build / "logs" / "fuzz_fake.log").read_text()
    each = sorted(l.split()[-1] for l in log.splitlines() if l.startswith("stat::number_of_executed_units:"))
    assert each == ["500", "501"], log


def test_one_worker_failing_fails_the_target(fuzz_build):
    rc, out, rows = run(fuzz_build, 2, 1001, FAKE_FAIL_RUNS="500")
    assert rc != 0, out
    assert rows[0]["rc"] == 1 and rows[0]["crashes"] == 1, rows
    assert "fuzz_fake FAILED (exit 1)" in out, out


def test_one_worker_is_the_old_way(fuzz_build):
    rc, out, rows = run(fuzz_build, 1, 777)
    assert rc == 0, out
    assert rows[0]["executions"] == 777 and rows[0]["workers"] == 1, rows


@pytest.mark.parametrize("bad", ["0", "x", "100"])
def test_a_bad_worker_count_is_refused(fuzz_build, bad):
    rc, out, _ = run(fuzz_build, bad, 10)
    assert rc == 2, out
    assert f"FUZZ_WORKERS must be a number from 1 to 99, not '{bad}'" in out, out


def test_a_timeout_that_does_not_come_again_is_the_hosts_load(fuzz_build):
    """A unit starved past -timeout on a busy host (a 38 ms input "timed out
    after 13 s" beside the e2e suite): run again alone it passes, so it is
    counted as starved, kept aside, and the target's row is not a failure."""
    rc, out, rows = run(fuzz_build, 2, 1001, FAKE_TIMEOUT_RUNS="500")
    assert rc == 0, out
    r = rows[0]
    assert r["rc"] == 0 and r["crashes"] == 0 and r["starved"] == 1 and r["executions"] == 1001, r
    assert "1 timeout(s) not reproduced when run again alone" in out, out
    assert os.listdir(fuzz_build / "starved" / "fuzz_fake") == ["timeout-0123abcd"], out
    assert os.listdir(fuzz_build / "artifacts" / "fuzz_fake") == [], out


def test_a_timeout_that_comes_again_is_a_finding(fuzz_build):
    rc, out, rows = run(fuzz_build, 2, 1001, FAKE_TIMEOUT_RUNS="500", FAKE_REPLAY_HANGS="1")
    assert rc != 0, out
    assert rows[0]["rc"] == 70 and rows[0]["crashes"] == 1 and rows[0]["starved"] == 0, rows
    assert "fuzz_fake FAILED (exit 70)" in out, out


def test_a_timeout_beside_a_crash_is_not_replayed_away(fuzz_build):
    """One worker crashed, the other timed out: a finding either way."""
    rc, out, rows = run(fuzz_build, 2, 1001, FAKE_TIMEOUT_RUNS="500", FAKE_FAIL_RUNS="501")
    assert rc != 0, out
    assert rows[0]["rc"] != 0 and rows[0]["crashes"] >= 1 and rows[0]["starved"] == 0, rows
