"""The kernel lane (issue 9): one boot per architecture of Debian 12's own
6.1 kernel under qemu (TCG), every scenario run inside that boot, and one
test per check on what the guest printed.

  LANE_ARCHES=x86,arm64   which guests (default both, x86_64 first)
  LANE_REPEAT=N           run the scan-watchdog scenarios N times per boot
  JANKBPF_BUILD           x86_64 build folder (default <repo>/build)
  JANKBPF_BUILD_ARM64     arm64 build folder (default <repo>/build/arm64)
  LANE_CONSOLE=x86:PATH   check a kept console (a boot's console.log)
                          instead of booting
  CI=true                 anything missing (qemu, a package, a kernel, a
                          build) fails the lane instead of skipping it
"""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "kernel-lane"))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))  # sched_trace: the guest's own sched trace

import lane as lane_mod  # noqa: E402

CI = os.environ.get("CI") == "true"


def _arches():
    arches = [a.strip() for a in os.environ.get("LANE_ARCHES", "x86,arm64").split(",") if a.strip()]
    bad = [a for a in arches if a not in lane_mod.ARCHES]
    if bad or not arches:
        raise pytest.UsageError(f"LANE_ARCHES={os.environ.get('LANE_ARCHES')!r}: "
                                f"a comma-separated list of {', '.join(lane_mod.ARCHES)}")
    return arches


def repeat():
    v = os.environ.get("LANE_REPEAT", "1")
    if not v.isdigit() or int(v) < 1:
        raise pytest.UsageError(f"LANE_REPEAT={v!r}: a whole number >= 1")
    return int(v)


ARCHES = _arches()
SCENARIOS = lane_mod.default_scenarios("x86", repeat())
MAIN = [n for n, k, _ in SCENARIOS if k == "main"]
MARKERS = [n for n, k, _ in SCENARIOS if k == "markers"]
WAITS = [n for n, k, _ in SCENARIOS if k == "waits"]
IDLE = [n for n, k, _ in SCENARIOS if k == "idle"]
CAUSES = [n for n, k, _ in SCENARIOS if k == "causes"]


def _unavailable(why):
    if CI:
        pytest.fail(f"kernel lane cannot run (CI=true, so this fails): {why}", pytrace=False)
    pytest.skip(f"kernel lane cannot run: {why}")


def _kept_consoles():
    """LANE_CONSOLE=ARCH:PATH,...: check a console a boot left (e.g.
    build/kernel-lane/x86/console.log) instead of booting."""
    out = {}
    for item in filter(None, (i.strip() for i in os.environ.get("LANE_CONSOLE", "").split(","))):
        arch, _, path = item.partition(":")
        if arch not in lane_mod.ARCHES or not os.path.isfile(path):
            raise pytest.UsageError(f"LANE_CONSOLE item {item!r}: ARCH:PATH, ARCH one of "
                                    f"{', '.join(lane_mod.ARCHES)}, PATH an existing console file")
        out[arch] = path
    return out


@pytest.fixture(scope="session", params=ARCHES)
def boot(request):
    """The one boot of this architecture, with every scenario run in it."""
    arch = request.param
    tr = request.config.pluginmanager.get_plugin("terminalreporter")

    def log(msg):
        if tr:
            tr.write_line(msg)
        else:
            print(msg, file=sys.stderr)

    kept = _kept_consoles().get(arch)
    if kept:  # a boot's console kept from before: its checks again, no boot
        log(f"lane {arch}: checking the kept console {kept} (LANE_CONSOLE), no boot")
        return lane_mod.Boot(arch, "kept console", kept, 0.0, False, 0, 0.0)
    try:
        return lane_mod.boot(arch, lane_mod.default_scenarios(arch, repeat()), log=log)
    except lane_mod.Unavailable as e:
        _unavailable(str(e))
