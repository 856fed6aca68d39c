"""The built package (make deb): its contents, and installing it with dpkg
on this machine -- the binary runs, the unit is in place and verifies --
then removing it. systemd is not PID 1 here, so nothing is started."""
import glob
import os
import re
import subprocess

import pytest

from conftest import ROOT, need_root, need_tool

DEB_DIR = os.path.join(ROOT, "build", "deb")


@pytest.fixture(scope="module")
def deb():
    debs = [d for d in glob.glob(os.path.join(DEB_DIR, "jankbpf_*.deb")) if "dbgsym" not in d]
    if len(debs) != 1:
        pytest.fail(f"expected one package in {DEB_DIR} (run make deb): {debs}")
    return debs[0]


def test_package_contents(deb):
    listing = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True, check=True).stdout
    paths = {line.split()[-1].lstrip(".") for line in listing.splitlines()}
    for want in ("/usr/sbin/jankbpf", "/lib/systemd/system/jankbpf.service", "/etc/default/jankbpf",
                 "/etc/jankbpf/config.json", "/etc/logrotate.d/jankbpf",
                 "/usr/share/man/man8/jankbpf.8.gz",
                 "/usr/share/jankbpf/schema/jankbpf-records.schema.json",
                 "/usr/share/doc/jankbpf/examples/jankbpf-filelog.yaml"):
        assert want in paths, f"{want} not in the package"
    conffiles = subprocess.run(["dpkg-deb", "-I", deb, "conffiles"], capture_output=True, text=True).stdout
    for conf in ("/etc/default/jankbpf", "/etc/jankbpf/config.json", "/etc/logrotate.d/jankbpf"):
        assert conf in conffiles


def test_lintian_found_no_errors():
    log = os.path.join(DEB_DIR, "lintian.log")
    assert os.path.exists(log), "make deb writes build/deb/lintian.log"
    errors = [l for l in open(log) if l.startswith("E:")]
    assert not errors, errors


def test_install_run_verify_remove(deb, tmp_path):
    need_root()
    analyze = need_tool("systemd-analyze", "systemd")
    status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", "jankbpf"], capture_output=True, text=True)
    if "install ok installed" in status.stdout:
        pytest.fail("a jankbpf package is already installed here; this test would replace and remove it")
    p = subprocess.run(["dpkg", "-i", deb], capture_output=True, text=True)
    try:
        assert p.returncode == 0, p.stdout + p.stderr
        v = subprocess.run(["/usr/sbin/jankbpf", "--version"], capture_output=True, text=True)
        assert v.returncode == 0 and re.match(r"jankbpf \S+", v.stdout), v.stdout + v.stderr
        unit = "/lib/systemd/system/jankbpf.service"
        assert os.path.exists(unit)
        ver = subprocess.run([analyze, "verify", unit], capture_output=True, text=True)
        assert ver.returncode == 0 and ver.stderr.strip() == "", ver.stderr
        sec = subprocess.run([analyze, "security", "--offline=true", unit], capture_output=True, text=True)
        m = re.search(r"Overall exposure level for jankbpf.service: (\d+\.\d+)", sec.stdout)
        assert m and float(m.group(1)) <= 4.0, sec.stdout
        man = subprocess.run(["man", "-w", "jankbpf"], capture_output=True, text=True)
        assert man.stdout.strip().endswith("jankbpf.8.gz"), man.stdout + man.stderr
        # Not enabled on install: an agent on every process is opt-in.
        assert not glob.glob("/etc/systemd/system/*/jankbpf.service")
    finally:
        r = subprocess.run(["dpkg", "-r", "jankbpf"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not os.path.exists("/usr/sbin/jankbpf")
    assert not os.path.exists("/lib/systemd/system/jankbpf.service")
    subprocess.run(["dpkg", "-P", "jankbpf"], capture_output=True, text=True)
