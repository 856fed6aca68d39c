"""End-to-end test set-up: real jankbpf, real BPF programs, real processes.

These tests need root and a kernel that loads jankbpf's BPF programs. Where
that is missing they are skipped with the reason; on the project's machines
(root, Linux 6.x with BTF) they run.
"""
import os
import subprocess

import pytest

from harness import BUILD, JANKBPF


def _why_not_runnable():
    if os.geteuid() != 0:
        return "end-to-end tests need root (CAP_BPF, CAP_PERFMON) to load BPF programs"
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        return "this kernel has no BTF (/sys/kernel/btf/vmlinux); jankbpf cannot load"
    if not os.path.exists(JANKBPF):
        return f"{JANKBPF} is not built (run make)"
    return None


def pytest_collection_modifyitems(config, items):
    why = _why_not_runnable()
    if why:
        # Under CI a test that cannot run has failed; elsewhere it is a
        # skip that says why, never a pass.
        if os.environ.get("CI") == "true":
            pytest.exit(f"end-to-end tests cannot run under CI: {why}", returncode=1)
        for item in items:
            item.add_marker(pytest.mark.skip(reason=why))


@pytest.fixture(scope="session", autouse=True)
def keep_cpu_share():
    """With scheduler autogroups every session gets an equal CPU share
    whatever the nice values inside it, so a busy neighbour session would
    halve a spinning target's CPU and blur its dominant state. Raise this
    session's group weight (it is inherited by every process the tests
    start); harmless where autogroups are off."""
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write("-20")
    except OSError:
        pass
    yield


@pytest.fixture(autouse=True)
def no_jankbpf_left_running():
    """A test that fails half-way must not leave its jankbpf attached."""
    yield
    from harness import stop_all
    stop_all()
