// What a watched process (or anyone) can put in front of the causes code:
// /proc/cgroups, mountinfo and cpu.max-style text, kallsyms text, maps
// text read for a faulting address's file and a uevent's DEVNAME, and the
// kernel's cause and subject records whose fields come from the process's
// own registers and memory (syscall arguments, the futex owner claim, comm
// names). Nothing may crash, spin or grow without bound, and the slices
// must stay exclusive: never more than the task's non-running time.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cause/attribute.h"
#include "cause/identity.h"
#include "cause/io_identity.h"
#include "cause/irq_text.h"
#include "cause/stack_source.h"
#include "stack/maps.h"

using namespace jankbpf;
using namespace jankbpf::cause;

namespace {

struct NoIds : Identities {
  std::string thread_comm(pid_t, pid_t tid) override { return tid % 3 ? "t" : ""; }
  bool thread_in(pid_t, pid_t tid) override { return tid % 2; }
  std::string fd_path(pid_t, int) override { return "pipe:[1]"; }
  std::string address_where(pid_t, uint64_t) override { return "x+0x1"; }
  CgroupInfo cgroup(uint64_t, uint32_t) override { return {"/g", "cgroup2", "1/2"}; }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0] % 4;
  data++;
  size--;
  std::string text(reinterpret_cast<const char*>(data), size);
  if (mode == 0) {
    auto subs = parse_proc_cgroups(text);
    auto mounts = parse_cgroup_mounts(text, subs);
    if (subs.size() > 64) abort();
    for (const auto& [h, m] : mounts)
      if (m.first.empty()) abort();
    (void)quota_text(text, text, text);
    (void)safe_name(text, 16);
    return 0;
  }
  if (mode == 1) {
    auto chunks = irq_text_chunks(text, 64);
    if (chunks.size() > 64) abort();
    for (const auto& [c, mask] : chunks)
      if (!mask || mask > 0xffff) abort();
    return 0;
  }
  if (mode == 3) {
    // A faulting address's file, at every mapping's edges, and a DEVNAME.
    const auto maps = stack::ProcMaps::parse(text);
    for (const auto& m : maps.entries())
      for (uint64_t a : {m.start, m.end - 1, m.start + (m.end - m.start) / 2}) {
        MappedFile f = file_at(maps, a);
        if (f.found && (f.path.size() > 4 * 512 || !m.inode)) abort();
        if (!f.path.empty() && f.path[0] != '/') abort();
        (void)f.name();
      }
    const std::string name = uevent_devname(text);
    if (name.size() > 64 || name.find("..") != std::string::npos) abort();
    for (char c : name)
      if (c == '\n' || c == ' ' || static_cast<unsigned char>(c) < 0x20) abort();
    return 0;
  }
  // Records: a cause event, then subject events, from the bytes.
  Evidence ev;
  jb_cause_event e{};
  memcpy(&e, data, std::min(size, sizeof e));
  ev.causes = e;
  for (size_t off = sizeof e; off + sizeof(jb_subject_event) <= size && ev.subjects.size() < 16;
       off += sizeof(jb_subject_event)) {
    jb_subject_event s;
    memcpy(&s, data + off, sizeof s);
    ev.subjects.push_back(s);
  }
  TaskRecord rec;
  rec.proc.pid = 100;
  rec.tid = 100;
  // A split from the record's first bytes too, finite and non-negative.
  rec.state.runnable_ms = static_cast<double>(e.hdr.pad % 100000);
  rec.state.sleeping_ms = static_cast<double>(e.hdr.time_ns % 1000000) / 10.0;
  rec.duration_ms = rec.state.runnable_ms + rec.state.sleeping_ms;
  NoIds ids;
  CollectedStacks stacks;
  attribute(rec, ev, true, ids, stacks);
  double total = 0;
  for (const auto& c : rec.cause) {
    if (!(c.ms >= 0) || std::isinf(c.ms)) abort();
    total += c.ms;
  }
  const double nonrun = rec.state.runnable_ms + rec.state.sleeping_ms;
  if (total > nonrun * 1.0001 + 0.06) abort();
  if (rec.cause.size() > JB_CAUSE_SLOTS + JB_CAUSE_NR + 1) abort();
  if (rec.why.size() > 64 * 1024) abort();
  return 0;
}
