"""What jankbpf takes from a host as the packaged unit runs it, for the
unit's MemoryHigh, MemoryMax and CPUQuota (debian/jankbpf.service says how
they follow from these figures).

jankbpf runs system-wide with the unit's ExecStart options (and --metrics),
in a cgroup-v1 memory and cpuacct cgroup of its own, for SECONDS, beside a
janky workload and whatever else the machine runs: 20 jank_targets (a
120 ms spin, sleep or naps task every 2 s), 4 with 600 ms tasks (traces),
node and python janking in their own code. Printed: the peak memory
charged to the cgroup (RSS, memfd copies, page cache, kernel memory with
BPF maps, trace-cmd children), CPU (children included) on average and in
the busiest second, and jankbpf's summary.

    sudo python3 bench/service_footprint.py [SECONDS]   (root; cgroup v1)
"""
import json, os, shutil, subprocess, sys, tempfile, time, signal
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECONDS = int(sys.argv[1]) if len(sys.argv) > 1 else 240
OUT = tempfile.mkdtemp(prefix="jankbpf-footprint-")
JB = os.path.join(ROOT, "build/jankbpf"); JT = os.path.join(ROOT, "build/tests/jank_target")
MEM = "/sys/fs/cgroup/memory/jankbpf-footprint"; CPU = "/sys/fs/cgroup/cpuacct/jankbpf-footprint"
for d in (MEM, CPU):
    os.makedirs(d, exist_ok=True)
def rd(p): return open(p).read().strip()
work = []
# 20 targets: a 120 ms task every 2 s (spin, sleep, 1 ms naps), as the soak.
for i in range(20):
    kind = ("spin", "sleep", "naps")[i % 3]
    work.append(subprocess.Popen([JT, "--script", f"{kind}:120x{SECONDS}", "--gap", "1880", "--start-delay", "4"],
                                 stdout=subprocess.DEVNULL))
# 4 with 600 ms tasks (past the trace threshold) every 15 s.
for i in range(4):
    work.append(subprocess.Popen([JT, "--script", f"{('spin','sleep')[i%2]}:600x{SECONDS//15}", "--gap", "14400",
                                  "--start-delay", str(5 + 3 * i)], stdout=subprocess.DEVNULL))
# node and python janking in their own code.
work.append(subprocess.Popen(["node", "-e", "function busy(ms){const e=Date.now()+ms;let x=0;while(Date.now()<e)x+=Math.sqrt(x+1);return x}"
                              "setTimeout(()=>setInterval(()=>busy(250),3000),4000)"], stdout=subprocess.DEVNULL))
work.append(subprocess.Popen(["python3.11", "-c", "import time,selectors\ns=selectors.DefaultSelector()\ntime.sleep(4)\n"
                              "def busy(t):\n e=time.time()+t\n while time.time()<e: pass\n"
                              "while True:\n s.select(2.7)\n busy(0.3)"], stdout=subprocess.DEVNULL))
time.sleep(0.5)
out = os.path.join(OUT, "janks.jsonl"); logs = os.path.join(OUT, "logs"); os.makedirs(logs, exist_ok=True)
def enter():
    for d in (MEM, CPU):
        open(os.path.join(d, "cgroup.procs"), "w").write(str(os.getpid()))
open(os.path.join(MEM, "memory.max_usage_in_bytes"), "w").write("0")
cpu0 = int(rd(os.path.join(CPU, "cpuacct.usage")))
jb = subprocess.Popen([JB, "--output", out, "--log-dir", logs, "--config", os.path.join(ROOT, "debian/config.json"),
                       "--metrics", "127.0.0.1:0"], preexec_fn=enter, stderr=subprocess.PIPE, text=True)
url = None
t0 = time.time(); peak = 0; samples = []; cpu_prev = cpu0; cpu_peak = 0; cpu_sec = []
while time.time() - t0 < SECONDS:
    use = int(rd(os.path.join(MEM, "memory.usage_in_bytes")))
    peak = max(peak, use); samples.append(use)
    time.sleep(1)
    c = int(rd(os.path.join(CPU, "cpuacct.usage"))); cpu_sec.append((c - cpu_prev) / 1e9); cpu_prev = c
stat = dict(l.split() for l in rd(os.path.join(MEM, "memory.stat")).splitlines())
kmem = int(rd(os.path.join(MEM, "memory.kmem.max_usage_in_bytes")))
maxu = int(rd(os.path.join(MEM, "memory.max_usage_in_bytes")))
cpu = (int(rd(os.path.join(CPU, "cpuacct.usage"))) - cpu0) / 1e9
jb.send_signal(signal.SIGTERM); err = jb.communicate(timeout=60)[1]
for p in work:
    p.kill(); p.wait()
recs = [json.loads(l) for l in open(out)]
summ = [r for r in recs if r.get("type") == "summary"][-1]
janks = sum(1 for r in recs if r.get("type") == "jank")
print(json.dumps({"seconds": SECONDS, "peak_mem_mib": round(maxu / 2**20, 1), "sampled_peak_mib": round(peak / 2**20, 1),
                  "kmem_peak_mib": round(kmem / 2**20, 1), "end_rss_mib": round(int(stat["total_rss"]) / 2**20, 1),
                  "end_cache_mib": round(int(stat["total_cache"]) / 2**20, 1), "end_shmem_mib": round(int(stat.get("total_shmem", 0)) / 2**20, 1),
                  "cpu_s": round(cpu, 2), "cpu_peak_1s": round(max(cpu_sec), 3),
                  "cpu_p99_1s": round(sorted(cpu_sec)[int(0.99 * (len(cpu_sec) - 1))], 3),
                  "cpu_seconds_over_50pct": sum(1 for x in cpu_sec if x > 0.5),
                  "mem_mib_by_30s": [round(samples[i] / 2**20) for i in range(0, len(samples), 30)], "cpu_share_of_one": round(cpu / SECONDS, 4), "janks": janks,
                  "max_rss_kb": summ.get("max_rss_kb"), "traces": summ.get("traces"), "stack_logs": summ.get("stack_logs"),
                  "lost_events": summ.get("lost_events"), "samples": summ.get("samples")}, indent=1))
for d in (MEM, CPU):
    try:
        os.rmdir(d)
    except OSError:
        pass
shutil.rmtree(OUT, ignore_errors=True)
