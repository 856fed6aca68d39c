// What names a cause: a thread's name, where an address lies, what a file
// descriptor is, a cgroup's path and quota. Read from /proc and the cgroup
// filesystems as the kernel has them at the time the record is made (a
// process may have closed the fd or exited since: then the field is left
// empty). Everything a watched process controls (thread names, mapping
// names) is bounded and has its control characters escaped.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "cause/io_identity.h"
#include "jankbpf/events.h"

namespace jankbpf::stack {
class ProcMaps;
class Kallsyms;
}

namespace jankbpf::cause {

class KernelObjects;

struct CgroupInfo {
  std::string path;   // in its hierarchy, "/jt-quota"
  std::string fs;     // "cgroup2", or "cgroup (cpu,cpuacct)" for v1
  std::string quota;  // "20000/100000" (quota/period, µs); "max/100000" unlimited
};

class Identities {
 public:
  virtual ~Identities() = default;
  // The name of thread tid of process pid; "" when tid is not a thread of
  // pid (or is gone).
  virtual std::string thread_comm(pid_t pid, pid_t tid) = 0;
  virtual bool thread_in(pid_t pid, pid_t tid) = 0;
  // What fd of pid is ("pipe:[123]", "/var/db/x"); "" when it is not open.
  virtual std::string fd_path(pid_t pid, int fd) = 0;
  // Where addr lies in pid's memory: "FILE+0xOFFSET" (file offset) for a
  // file mapping, "[heap]", "[stack]", "[anon]"; "" unmapped.
  virtual std::string address_where(pid_t pid, uint64_t addr) = 0;
  // A cgroup by its kernfs id and hierarchy (0: cgroup2).
  virtual CgroupInfo cgroup(uint64_t id, uint32_t hierarchy) = 0;
  // fault: the file mapped at addr in pid; io: a block device's name, the
  // device an fd's file lives on (io_identity.h). Nothing known by default.
  virtual MappedFile mapped_file(pid_t, uint64_t) { return {}; }
  virtual std::string device_name(uint32_t, uint32_t) { return ""; }
  virtual bool fd_device(pid_t, int, BlockDevice*) { return false; }
  // Kernel symbols (cause/kernel_names.h): a text address as "sym+0xoff",
  // a data address (a static lock) as "sym" or "sym+0xoff"; "" unknown.
  virtual std::string kernel_text(uint64_t) { return ""; }
  virtual std::string kernel_object(uint64_t) { return ""; }
};

// Where addr lies in these maps (see Identities::address_where).
std::string where_in(const stack::ProcMaps& maps, uint64_t addr);

// The real thing, on /proc. Not thread-safe (the reporter thread owns it).
// known_maps: maps read earlier (the unwinder's), for a process gone since.
class ProcIdentities : public Identities {
 public:
  ProcIdentities();
  ~ProcIdentities() override;
  using MapsOf = const stack::ProcMaps* (*)(void* ctx, pid_t pid);
  void set_known_maps(MapsOf fn, void* ctx) {
    maps_of_ = fn;
    maps_ctx_ = ctx;
  }
  std::string thread_comm(pid_t pid, pid_t tid) override;
  bool thread_in(pid_t pid, pid_t tid) override;
  std::string fd_path(pid_t pid, int fd) override;
  std::string address_where(pid_t pid, uint64_t addr) override;
  CgroupInfo cgroup(uint64_t id, uint32_t hierarchy) override;
  MappedFile mapped_file(pid_t pid, uint64_t addr) override;
  std::string device_name(uint32_t major, uint32_t minor) override { return block_device_name(major, minor); }
  bool fd_device(pid_t pid, int fd, BlockDevice* out) override { return cause::fd_device(pid, fd, out); }
  std::string kernel_text(uint64_t addr) override;
  std::string kernel_object(uint64_t addr) override;
  // The kernel's text symbols, shared with the unwinder (read once there).
  using KallsymsOf = const stack::Kallsyms& (*)(void* ctx);
  void set_kallsyms(KallsymsOf fn, void* ctx) {
    kallsyms_of_ = fn;
    kallsyms_ctx_ = ctx;
  }

 private:
  KallsymsOf kallsyms_of_ = nullptr;
  void* kallsyms_ctx_ = nullptr;
  std::unique_ptr<KernelObjects> objects_;  // data symbols, read at the first need
  MapsOf maps_of_ = nullptr;
  void* maps_ctx_ = nullptr;
  // Mount point and fs text of each cgroup hierarchy, found once.
  bool mounts_read_ = false;
  std::map<uint32_t, std::pair<std::string, std::string>> mounts_;
  void read_mounts();
};

struct Prefetched;

// Reads what the slices of a cause record will need while the process is
// still there (on the ring thread, at the record's arrival): where lock
// addresses lie, what fds are, the names of the threads of the process
// they name. A few small /proc reads; the maps only for lock slices.
void prefetch(Prefetched& out, const jb_cause_event& e, Identities& live);

// Answers from a prefetch first, from `fallback` for anything else.
class PrefetchedIdentities : public Identities {
 public:
  PrefetchedIdentities(const Prefetched& p, Identities& fallback) : p_(p), fallback_(fallback) {}
  std::string thread_comm(pid_t pid, pid_t tid) override;
  bool thread_in(pid_t pid, pid_t tid) override;
  std::string fd_path(pid_t pid, int fd) override;
  std::string address_where(pid_t pid, uint64_t addr) override;
  CgroupInfo cgroup(uint64_t id, uint32_t hierarchy) override { return fallback_.cgroup(id, hierarchy); }
  MappedFile mapped_file(pid_t pid, uint64_t addr) override;
  std::string device_name(uint32_t major, uint32_t minor) override { return fallback_.device_name(major, minor); }
  bool fd_device(pid_t pid, int fd, BlockDevice* out) override;
  std::string kernel_text(uint64_t addr) override { return fallback_.kernel_text(addr); }
  std::string kernel_object(uint64_t addr) override { return fallback_.kernel_object(addr); }

 private:
  const Prefetched& p_;
  Identities& fallback_;
};

// For tests and the fuzz target: the parsers behind ProcIdentities.
// /proc/cgroups -> {subsystem, hierarchy}; mountinfo -> hierarchy id ->
// (mount point, fs text), given the subsystems' hierarchies.
std::map<std::string, uint32_t> parse_proc_cgroups(const std::string& text);
std::map<uint32_t, std::pair<std::string, std::string>> parse_cgroup_mounts(
    const std::string& mountinfo, const std::map<std::string, uint32_t>& subsystems);
// "20000 100000" (cpu.max) or quota and period files (v1) as "20000/100000".
std::string quota_text(const std::string& cpu_max, const std::string& v1_quota, const std::string& v1_period);
// A name a process chose, made safe for one line of text: at most `max`
// bytes, control characters escaped.
std::string safe_name(const std::string& s, size_t max = 256);

}  // namespace jankbpf::cause
