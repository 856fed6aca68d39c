#include "trace/ftrace_instance.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "util/fd.h"
#include "util/tracefs.h"

namespace jankbpf {
namespace {

constexpr const char* kPrefix = "jankbpf-";
constexpr unsigned kMinBufferKb = 64;

bool write_file(const std::string& path, const std::string& value, int extra_flags = 0) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC | extra_flags));
  if (!fd) return false;
  ssize_t w = ::write(fd.get(), value.data(), value.size());
  return w == static_cast<ssize_t>(value.size());
}

std::string read_file(const std::string& path, size_t max = 4096) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return "";
  std::string out(max, '\0');
  ssize_t r = ::read(fd.get(), out.data(), max);
  out.resize(r > 0 ? static_cast<size_t>(r) : 0);
  return out;
}

bool exists(const std::string& path) {
  struct stat st{};
  return ::lstat(path.c_str(), &st) == 0;
}

// "jankbpf-123" -> 123; 0 for anything else.
pid_t pid_of(const std::string& name) {
  if (name.rfind(kPrefix, 0) != 0) return 0;
  std::string digits = name.substr(strlen(kPrefix));
  if (digits.empty() || digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return 0;
  return static_cast<pid_t>(std::stol(digits));
}

double clock_s(clockid_t id) {
  struct timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

// When PID started, in CLOCK_REALTIME seconds; < 0 if unknown. /proc's
// starttime counts clock ticks of boot time.
double process_start_realtime(pid_t pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return -1;
  // Fields after "comm)": state is field 3, starttime field 22.
  const char* p = stat.c_str() + paren + 1;
  for (int field = 3; field < 22 && *p; ++field) {
    while (*p == ' ') ++p;
    while (*p && *p != ' ') ++p;
  }
  char* end = nullptr;
  unsigned long long ticks = strtoull(p, &end, 10);
  if (end == p) return -1;
  double boot_realtime = clock_s(CLOCK_REALTIME) - clock_s(CLOCK_BOOTTIME);
  return boot_realtime + static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

bool looks_like_jankbpf(pid_t pid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  if (read_file(proc + "/comm").rfind("jankbpf", 0) == 0) return true;
  char exe[4096];
  ssize_t n = ::readlink((proc + "/exe").c_str(), exe, sizeof exe - 1);
  if (n <= 0) return false;
  exe[n] = '\0';
  const char* base = strrchr(exe, '/');
  return strncmp(base ? base + 1 : exe, "jankbpf", 7) == 0;
}

unsigned count_cpus(const std::string& per_cpu_dir) {
  unsigned n = 0;
  if (DIR* d = ::opendir(per_cpu_dir.c_str())) {
    while (struct dirent* de = ::readdir(d))
      if (strncmp(de->d_name, "cpu", 3) == 0) ++n;
    ::closedir(d);
  }
  if (n == 0) {
    long c = sysconf(_SC_NPROCESSORS_CONF);
    n = c > 0 ? static_cast<unsigned>(c) : 1;
  }
  return n;
}

// Disarms and removes one instance directory, retrying while busy.
bool remove_dir(const std::string& path, std::string* error) {
  if (!exists(path)) return true;
  write_file(path + "/tracing_on", "0");
  write_file(path + "/events/enable", "0");
  for (int attempt = 0; attempt < 20; ++attempt) {
    if (::rmdir(path.c_str()) == 0 || errno == ENOENT) return true;
    if (errno != EBUSY) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (error) *error = "cannot remove " + path + ": " + strerror(errno);
  return false;
}

}  // namespace

const std::vector<std::string>& FtraceInstance::default_events() {
  static const std::vector<std::string> events = {
      "sched/sched_switch",
      "sched/sched_wakeup",
      "sched/sched_wakeup_new",
      "sched/sched_migrate_task",
      "sched/sched_process_fork",
      "sched/sched_process_exec",
      "sched/sched_process_exit",
      "sched/sched_process_hang",
      "sched/sched_blocked_reason",  // needs schedstats: often missing
      "irq/irq_handler_entry",
      "irq/irq_handler_exit",
      "irq/softirq_entry",
      "irq/softirq_exit",
      "block/block_rq_issue",
      "block/block_rq_complete",
      "vmscan/mm_vmscan_direct_reclaim_begin",
      "vmscan/mm_vmscan_direct_reclaim_end",
      "compaction/mm_compaction_begin",
      "compaction/mm_compaction_end",
      "writeback/balance_dirty_pages",
      "oom/mark_victim",
      "signal/signal_generate",
      "signal/signal_deliver",
      "power/cpu_frequency",
      "task/task_rename",
  };
  return events;
}

FtraceInstance::FtraceInstance(FtraceOptions options) : options_(std::move(options)) {
  if (options_.events.empty()) options_.events = default_events();
  name_ = options_.name.empty() ? kPrefix + std::to_string(getpid()) : options_.name;
  recording_ = options_.record_at_start;
}

FtraceInstance::~FtraceInstance() { remove(); }

bool FtraceInstance::owner_alive(const std::string& root, const std::string& name) {
  pid_t pid = pid_of(name);
  if (pid <= 0) return true;  // not a jankbpf-PID name: not ours to judge
  if (!exists("/proc/" + std::to_string(pid))) return false;
  if (!looks_like_jankbpf(pid)) return false;  // the pid went to another program
  // A jankbpf that started after the instance was made cannot have made
  // it: the pid was reused. One second of slack covers tick granularity.
  struct stat st{};
  double started = process_start_realtime(pid);
  if (started > 0 && ::stat((root + "/instances/" + name).c_str(), &st) == 0) {
    double made = static_cast<double>(st.st_ctim.tv_sec) + st.st_ctim.tv_nsec / 1e9;
    if (made + 1.0 < started) return false;
  }
  return true;
}

std::vector<std::string> FtraceInstance::remove_stale(const std::string& root, const std::string& keep) {
  std::vector<std::string> removed;
  std::vector<std::string> names;
  if (DIR* d = ::opendir((root + "/instances").c_str())) {
    while (struct dirent* de = ::readdir(d))
      if (pid_of(de->d_name) > 0 && keep != de->d_name) names.push_back(de->d_name);
    ::closedir(d);
  }
  for (const auto& name : names) {
    if (owner_alive(root, name)) continue;
    if (remove_dir(root + "/instances/" + name, nullptr)) removed.push_back(name);
  }
  return removed;
}

bool FtraceInstance::create(std::string& error) {
  if (active_) return true;
  root_ = options_.tracefs_root;
  if (root_.empty()) {
    std::string why;
    root_ = tracefs::root(&why);
    if (root_.empty()) {
      error = "trace: " + why;
      return false;
    }
  }
  path_ = root_ + "/instances/" + name_;
  // An instance under our own name predates us (a reused pid): stale too.
  remove_stale(root_);
  if (exists(path_) && !remove_dir(path_, &error)) return false;
  if (::mkdir(path_.c_str(), 0750) != 0) {
    error = "trace: cannot create ftrace instance " + path_ + ": " + strerror(errno);
    return false;
  }
  active_ = true;
  // A new instance records at once; one that records on demand must not
  // hold the events of its own set-up.
  if (!recording_) write_file(path_ + "/tracing_on", "0");

  const unsigned cpus = count_cpus(path_ + "/per_cpu");
  buffer_kb_ = std::max(kMinBufferKb, std::min(options_.buffer_kb_per_cpu, options_.buffer_kb_total / cpus));
  if (!write_file(path_ + "/buffer_size_kb", std::to_string(buffer_kb_))) {
    error = "trace: cannot size " + path_ + "/buffer_size_kb to " + std::to_string(buffer_kb_) +
            " KB: " + strerror(errno);
    remove();
    return false;
  }
  if (!arm(error)) {
    remove();
    return false;
  }
  return true;
}

bool FtraceInstance::configure(std::string& error) {
  // Overwrite: a flight recorder keeps the newest events, not the oldest.
  if (!write_file(path_ + "/options/overwrite", "1")) {
    error = "trace: cannot set " + path_ + "/options/overwrite: " + strerror(errno);
    return false;
  }
  // Setting the clock clears the buffer, so only when it differs.
  if (read_file(path_ + "/trace_clock").find("[mono]") == std::string::npos &&
      !write_file(path_ + "/trace_clock", "mono")) {
    error = "trace: cannot set " + path_ + "/trace_clock to mono: " + strerror(errno);
    return false;
  }
  enabled_.clear();
  missing_.clear();
  for (const auto& ev : options_.events) {
    std::string rel = ev;
    std::replace(rel.begin(), rel.end(), ':', '/');
    if (write_file(path_ + "/events/" + rel + "/enable", "1"))
      enabled_.push_back(rel);
    else
      missing_.push_back(rel);
  }
  if (enabled_.empty()) {
    error = "trace: none of the trace events could be enabled in " + path_;
    return false;
  }
  return true;
}

bool FtraceInstance::arm(std::string& error) {
  if (!active_) {
    error = "trace: instance " + name_ + " is not created";
    return false;
  }
  if (!configure(error)) return false;
  if (!write_file(path_ + "/tracing_on", recording_ ? "1" : "0")) {
    error = "trace: cannot set " + path_ + "/tracing_on: " + strerror(errno);
    return false;
  }
  paused_ = false;
  return true;
}

bool FtraceInstance::pause() {
  if (!active_) return false;
  paused_ = true;
  return write_file(path_ + "/tracing_on", "0");
}

bool FtraceInstance::set_recording(bool on) {
  recording_ = on;
  if (!active_ || paused_) return active_;
  return write_file(path_ + "/tracing_on", on ? "1" : "0");
}

bool FtraceInstance::remove() {
  if (path_.empty()) return true;
  if (!remove_dir(path_, &last_error_)) return false;
  active_ = false;
  return true;
}

}  // namespace jankbpf
