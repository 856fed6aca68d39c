"""Package checks: the unit file, the logrotate snippet, the man page and
(tests/package/test_deb.py, `make deb-check`) the built .deb itself."""
import os
import shutil

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("JANKBPF_BUILD", os.path.join(ROOT, "build"))


def need_tool(name, package):
    """The path of a tool, or a skip naming the package (a failure under CI)."""
    path = shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/sbin/{name}") if os.path.exists(p)), None)
    if path:
        return path
    why = f"{name} is missing (Debian package {package}; scripts/install-deps.sh installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


def cannot_run(why):
    """A test that cannot run: a failure under CI, a skip saying why elsewhere."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"cannot run under CI: {why}")
    pytest.skip(why)


def need_root():
    if os.geteuid() != 0:
        why = "needs root (dpkg -i)"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
