"""Sections 7e and 7f (issue 29): the Java frame reader, a JVM's loop threads."""
from __future__ import annotations


def hotspot(doc, d):
    if "compiled-leaf" not in d:
        doc.p(f"Not run ({d.get('error', '?')}).", term=True)
        return
    c = d["compiled-leaf"]
    doc.p("`build/jankbpf-unit \"[hotspot-bench]\"`: the ring thread's read of one sample's Java frames from a "
          f"live flagless JVM ({c['java']}, tests/apps/java/HsSpin.java), 5,000 reads each, process_vm_readv; "
          f"HotSpot's tables read in {c['find_ms']:.1f} ms once per JVM.", term=True)
    rows = []
    for key, what in (("compiled-leaf", "a compiled leaf, from its registers"),
                      ("native-leaf", "a thread in Thread.sleep, from its last Java frame"),
                      ("interpreted", "-Xint, the leaf's bcp from r13")):
        r = d.get(key)
        if r:
            rows.append([what, f"{r['frames']} ({r['interpreted']} interpreted, {r['compiled']} compiled, "
                         f"{r['unreadable']} unreadable)", f"{r['cold_us']:.0f}", f"{r['p50_us']:.1f}",
                         f"{r['p99_us']:.1f}", f"{r['reads']:.0f}"])
    doc.table(["sample", "Java frames", "cold µs", "warm p50 µs", "p99 µs", "system calls"], rows)


def jvm(doc, d):
    if "error" in d:
        doc.p(f"Not run ({d['error']}).", term=True)
        return
    rf = d.get("runtime_frames", {})
    doc.p(f"`java -cp DIR LoopServer` with no JVM option (the JDK's HttpServer and an NIO loop, "
          f"tests/apps/java/LoopServer.java) under `--threads main`: exit {d['rc']}, {len(d['janks'])} janks, "
          f"{d.get('samples')} samples; Java frames placed {rf.get('read', 0)}, unreadable "
          f"{rf.get('unreadable', 0)}; stack logs: {d['to_thread_run']} of {d['log_samples']} samples reach "
          f"`java.lang.Thread.run`.", term=True)
    doc.table(["thread", "ms", "runnable_name", "innermost Java frame", "Java frames (jit / inlined / "
               "unreadable)", "jvm_pause"],
              [[j["thread"], f"{j['ms']:.0f}", f"`{j['runnable_name']}`", f"`{j['leaf']}`",
                f"{j['java']} ({j['jit']} / {j['inlined']} / {j['unreadable']})",
                f"{j['jvm_pause']['kind']} {j['jvm_pause'].get('operation', '')} {j['jvm_pause']['ms']:.0f} ms"
                if j.get("jvm_pause") else ""] for j in d["janks"]])
