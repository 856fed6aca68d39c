#!/usr/bin/python3
"""jank_bcc.py: the same detection as bench/jank.bt, written as a BCC tool
(Debian's python3-bpfcc), for the benchmark's startup comparison.

A task on a main thread (tid == pid) runs from the return of an event-loop
wait to the next entry into one; tasks at least THRESHOLD_MS long are
printed when they end. Prints "jank_bcc: attached N tracepoints" on stderr
once BPF() has compiled, loaded and attached everything (BCC attaches
TRACEPOINT_PROBE functions inside the constructor).

    jank_bcc.py [THRESHOLD_MS]

BCC compiles its C with clang at startup and needs kernel headers: the
running kernel's (/lib/modules/$(uname -r)/build), or a tree named by
BCC_KERNEL_SOURCE (scripts/bench.sh points it at Debian's linux-headers
when the running kernel has none).
"""
import signal
import sys

from bcc import BPF

WAITS = ["epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "select", "pselect6"]

PROLOGUE = r"""
#include <linux/types.h>
#include <linux/signal.h>
/* sigset_t and fd_set: the wait tracepoints' formats name them. */
struct jank_t {
    u32 pid;
    u32 tid;
    u64 dur_ns;
    char comm[16];
};
BPF_HASH(begin, u32, u64, 16384);
BPF_PERF_OUTPUT(janks);

static __always_inline int task_begins(void) {
    u64 id = bpf_get_current_pid_tgid();
    u32 tid = (u32)id;
    if (tid != (u32)(id >> 32))
        return 0;
    u64 now = bpf_ktime_get_ns();
    begin.update(&tid, &now);
    return 0;
}

static __always_inline int task_ends(void *ctx) {
    u64 id = bpf_get_current_pid_tgid();
    u32 tid = (u32)id;
    if (tid != (u32)(id >> 32))
        return 0;
    u64 *b = begin.lookup(&tid);
    if (!b)
        return 0;
    u64 d = bpf_ktime_get_ns() - *b;
    begin.delete(&tid);
    if (d >= THRESHOLD_NS) {
        struct jank_t e = {};
        e.pid = id >> 32;
        e.tid = tid;
        e.dur_ns = d;
        bpf_get_current_comm(&e.comm, sizeof(e.comm));
        janks.perf_submit(ctx, &e, sizeof(e));
    }
    return 0;
}
"""

HOOKS = r"""
TRACEPOINT_PROBE(syscalls, sys_exit_%(w)s) { return task_begins(); }
TRACEPOINT_PROBE(syscalls, sys_enter_%(w)s) { return task_ends(args); }
"""


def main():
    threshold_ms = int(sys.argv[1]) if len(sys.argv) > 1 else 150
    waits = [w for w in WAITS if BPF.tracepoint_exists("syscalls", "sys_enter_" + w)]
    text = PROLOGUE + "".join(HOOKS % {"w": w} for w in waits)
    stop = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.append(1))
    b = BPF(text=text, cflags=["-DTHRESHOLD_NS=%dULL" % (threshold_ms * 1000000)])

    def on_jank(cpu, data, size):
        e = b["janks"].event(data)
        print("jank pid=%d tid=%d comm=%s duration_us=%d"
              % (e.pid, e.tid, e.comm.decode(errors="replace"), e.dur_ns // 1000), flush=True)

    b["janks"].open_perf_buffer(on_jank)
    print("jank_bcc: attached %d tracepoints" % (2 * len(waits)), file=sys.stderr, flush=True)
    while not stop:
        b.perf_buffer_poll(timeout=200)


if __name__ == "__main__":
    main()
