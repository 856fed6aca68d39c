#include "bpf/perf_keeper.h"

#include <bpf/bpf.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "util/tracefs.h"

namespace jankbpf {

std::unique_ptr<PerfKeeper> PerfKeeper::create(uint32_t capacity, std::string* error) {
  int fd = bpf_map_create(BPF_MAP_TYPE_PERF_EVENT_ARRAY, "jb_perf_keep", sizeof(uint32_t), sizeof(uint32_t),
                          capacity, nullptr);
  if (fd < 0) {
    *error = std::string("cannot create the perf event keeper map: ") + strerror(errno);
    return nullptr;
  }
  return std::unique_ptr<PerfKeeper>(new PerfKeeper(fd, capacity));
}

PerfKeeper::PerfKeeper(int fd, uint32_t capacity) : fd_(fd) {
  free_.reserve(capacity);
  for (uint32_t i = capacity; i-- > 0;) free_.push_back(i);
}

// The map's release drops every kept reference one grace period later, in
// the kernel's worker: nothing here waits for the events to close.
PerfKeeper::~PerfKeeper() { close(fd_); }

std::optional<uint32_t> PerfKeeper::keep(int perf_fd) {
  if (free_.empty()) {
    refused_++;
    return std::nullopt;
  }
  const uint32_t slot = free_.back();
  const uint32_t value = static_cast<uint32_t>(perf_fd);
  if (bpf_map_update_elem(fd_, &slot, &value, BPF_ANY) != 0) {
    refused_++;
    return std::nullopt;
  }
  free_.pop_back();
  kept_++;
  return slot;
}

void PerfKeeper::release(uint32_t slot) {
  if (bpf_map_delete_elem(fd_, &slot) == 0) {
    free_.push_back(slot);
    kept_--;
  }
}

namespace {

int perf_event_open(perf_event_attr* attr, int pid, int cpu) {
  return static_cast<int>(syscall(SYS_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC));
}

// A small sysfs or tracefs file's first number (an id, a PMU type, the
// "config:N" of a format bit); -1 when unreadable.
long read_number(const std::string& path, const char* format) {
  FILE* f = fopen(path.c_str(), "re");
  if (!f) return -1;
  long v = -1;
  if (fscanf(f, format, &v) != 1) v = -1;
  fclose(f);
  return v;
}

}  // namespace

int open_tracepoint_event(const std::string& category, const std::string& name, std::string* error) {
  std::string why;
  const std::string& root = tracefs::root(&why);
  if (root.empty()) {
    *error = why;
    return -1;
  }
  const long id = read_number(root + "/events/" + category + "/" + name + "/id", "%ld");
  if (id < 0) {
    *error = "no id for tracepoint " + category + ":" + name;
    return -1;
  }
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_TRACEPOINT;
  attr.config = static_cast<uint64_t>(id);
  attr.sample_period = 1;
  attr.wakeup_events = 1;
  const int fd = perf_event_open(&attr, -1, 0);  // every task, one CPU: libbpf's way
  if (fd < 0) *error = "perf_event_open of tracepoint " + category + ":" + name + ": " + strerror(errno);
  return fd;
}

int open_uprobe_event(const std::string& binary, uint64_t offset, bool retprobe, int pid, std::string* error) {
  static const long type = read_number("/sys/bus/event_source/devices/uprobe/type", "%ld");
  static const long retprobe_bit = read_number("/sys/bus/event_source/devices/uprobe/format/retprobe", "config:%ld");
  if (type < 0 || (retprobe && (retprobe_bit < 0 || retprobe_bit > 63))) {
    *error = "the kernel has no uprobe PMU (/sys/bus/event_source/devices/uprobe)";
    return -1;
  }
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = static_cast<uint32_t>(type);
  if (retprobe) attr.config |= 1ull << retprobe_bit;
  attr.config1 = reinterpret_cast<uintptr_t>(binary.c_str());
  attr.config2 = offset;
  const int fd = perf_event_open(&attr, pid < 0 ? -1 : pid, pid < 0 ? 0 : -1);
  if (fd < 0) *error = std::string("perf_event_open of a uprobe: ") + strerror(errno);
  return fd;
}

}  // namespace jankbpf
