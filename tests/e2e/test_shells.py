"""An interactive shell on a terminal, watched system-wide style (--comm):
while it waits for its foreground job it is idle, not janky; its own slow
work is still a jank.

bash -i on a pty reads each line with readline (pselect6: the event-loop
wait), runs the line as a job in its own process group, hands that group the
terminal and sleeps in wait4. Without the job-wait rule the whole `sleep`
below would be one task of bash's main thread.
"""
import os
import pty
import select
import shutil
import signal
import time

from harness import Jankbpf, need

BASH = shutil.which("bash")


class Pty:
    """bash -i on a pseudo-terminal of its own (its controlling tty)."""

    def __init__(self, binary):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            # The child: a new session with the pty as its controlling tty.
            env = {"PATH": "/usr/bin:/bin", "HOME": "/", "TERM": "dumb", "PS1": "$ "}
            os.execve(binary, [binary, "--norc", "--noprofile", "-i"], env)
        self.out = b""

    def send(self, line):
        os.write(self.fd, line.encode() + b"\n")

    def read_until(self, marker, timeout=10.0):
        deadline = time.monotonic() + timeout
        while marker.encode() not in self.out:
            left = deadline - time.monotonic()
            assert left > 0, f"shell never printed {marker!r}: {self.out[-400:]!r}"
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    self.out += os.read(self.fd, 4096)
                except OSError:
                    break

    def close(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)
        os.close(self.fd)


def test_shell_waiting_for_its_foreground_job_is_idle_but_its_own_work_is_a_jank(tmp_path):
    need(BASH is not None, "needs bash for an interactive shell")
    # bash under a name of its own (comm comes from the exec'd path), so
    # only this shell is watched.
    comm = "jb-test-shell"
    link = tmp_path / comm
    link.symlink_to(BASH)
    jb = Jankbpf("--comm", comm, "--ignore-startup-time", "3", "--log-type", "2")
    sh = Pty(str(link))
    try:
        sh.send("echo ready-$((6*7))")
        sh.read_until("ready-42")
        time.sleep(3.3)  # past --ignore-startup-time
        # A foreground job: bash hands it the terminal and sleeps in wait4.
        t0 = time.monotonic()
        sh.send("sleep 0.8; echo slept-$((2*3))")
        sh.read_until("slept-6")
        assert time.monotonic() - t0 >= 0.8
        # bash's own work: a builtin loop on its main thread, no child.
        sh.send("i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo looped-$((3*3))")
        sh.read_until("looped-9", timeout=30)
        time.sleep(0.3)
    finally:
        jb.stop()
        sh.close()
    janks = [j for j in jb.of_type("jank") if j["pid"] == sh.pid]
    hangs = [j for j in jb.of_type("hang") if j["pid"] == sh.pid]
    assert not hangs, hangs
    # The loop is one jank of the shell, mostly running; the 800 ms sleep is
    # in none of them (the job ran in another process group, with the tty).
    # (Running or waiting for a CPU: bash is not real-time, and on a busy
    # machine its loop queues for much of its time.)
    loops = [j for j in janks
             if j["state_ms"]["running"] + j["state_ms"]["runnable"] > 0.5 * j["duration_ms"]]
    assert len(loops) == 1, [(j["duration_ms"], j["state_ms"], j["wait_syscall"]) for j in janks]
    assert all(j["state_ms"]["sleeping"] < 400 for j in janks), janks
    # The task after the job ended began at the return of wait4.
    assert all(j["wait_syscall"] in ("pselect6", "wait4", "waitid") for j in janks), janks
