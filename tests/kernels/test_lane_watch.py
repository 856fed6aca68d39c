"""The lane's own watch on a guest's console (no boot): a hung guest ends
its boot early, whether it reported a lockup or went silent."""
import pytest

from conftest import lane_mod


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(lane_mod.time, "monotonic", lambda: now[0])
    return now


def test_a_lockup_then_nothing_else_is_stuck(tmp_path, clock):
    con = tmp_path / "console.log"
    con.write_text("@@LANE START a 1.0\n")
    w = lane_mod.StuckWatch(str(con))
    assert not w.stuck()
    con.write_text("@@LANE START a 1.0\n[ 30.0] watchdog: BUG: soft lockup - CPU#1 stuck for 27s! [x:1]\n")
    clock[0] += lane_mod.STUCK_S - 1
    assert not w.stuck()
    clock[0] += 2
    assert w.stuck() and not w.silent


def test_output_after_a_lockup_is_progress(tmp_path, clock):
    con = tmp_path / "console.log"
    con.write_text("[ 30.0] watchdog: BUG: soft lockup - CPU#1 stuck for 27s! [x:1]\n")
    w = lane_mod.StuckWatch(str(con))
    clock[0] += lane_mod.STUCK_S - 1
    with open(con, "a") as f:
        f.write("@@LANE END a/records rc=0\n")
    assert not w.stuck()
    clock[0] += lane_mod.STUCK_S - 1
    assert not w.stuck()


def test_a_silent_guest_is_stuck_without_any_lockup(tmp_path, clock):
    con = tmp_path / "console.log"
    con.write_text("@@LANE START timer-causes 288.61\n")
    w = lane_mod.StuckWatch(str(con))
    assert not w.stuck()
    clock[0] += lane_mod.SILENT_S - 1
    assert not w.stuck()
    clock[0] += 2
    assert w.stuck() and w.silent
