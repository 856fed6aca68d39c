"""End-to-end tests of processes in their own mount namespace: jankbpf must
read a containerised process's binaries through the process (/proc/PID/root,
map_files), never by the host path, which may not exist or may be another
file."""
import os
import re
import subprocess

from harness import BUILD, Jankbpf

STACK_LOOP = os.path.join(BUILD, "tests", "stack_loop")
IGNORE = "3"


def build_id_of(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True,
                         check=True).stdout
    return re.search(r"Build ID: ([0-9a-f]+)", out).group(1)


def test_process_in_own_mount_namespace_is_symbolized_from_its_own_files(tmp_path):
    # Inside the namespace a tmpfs covers `root`, and the binary is copied
    # there: on the host, root/bin/stack_loop_ns does not exist.
    root = tmp_path / "nsroot"
    root.mkdir()
    inner = str(root / "bin" / "stack_loop_ns")
    jb = Jankbpf("--comm", "stack_loop_ns", "--ignore-startup-time", IGNORE,
                 "--log-type", "1", "--log-dir", str(tmp_path / "logs"))
    # Short tasks after the long one keep the process (and so its namespace
    # and tmpfs) alive while its stack is symbolized.
    script = (f"mount -t tmpfs jankbpf-e2e {root} && mkdir {root}/bin && "
              f"cp {STACK_LOOP} {inner} && exec {inner} 3.3 deep:300 deep:5 deep:5 deep:5 deep:5")
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert not os.path.exists(inner), "the namespace's tmpfs leaked to the host"
    assert jb.wait_for(lambda r: r.get("type") == "jank", timeout=10), jb.stderr
    assert jb.stop() == 0
    janks = [j for j in jb.of_type("jank") if j["duration_ms"] > 250]
    assert len(janks) == 1, jb.of_type("jank")
    j = janks[0]
    assert j["exe"] == inner
    assert j["bundle_version"] == build_id_of(STACK_LOOP)
    # The stack is named from the namespace's copy: its path, its symbols.
    symbols = [f["symbol"] for f in j["stack"]]
    assert symbols.index("inner") < symbols.index("middle") < symbols.index("outer") \
        < symbols.index("main"), symbols
    paths = [path for path, _ in j["modules"]]
    assert inner in paths, paths
    mine = paths.index(inner)
    assert j["modules"][mine][1] == build_id_of(STACK_LOOP)
    assert all(f["module_index"] == mine for f in j["stack"]
               if f["symbol"] in ("inner", "middle", "outer", "run_task"))
    assert re.search(r"/bin/stack_loop_ns\(inner\+\d+\)", j["heaviest_stack"]), j["heaviest_stack"]
