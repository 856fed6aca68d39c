#include "trace/capture.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "trace/ftrace_instance.h"

namespace jankbpf {
namespace {

constexpr size_t kMaxToolOutput = 4096;
constexpr const char* kDatName = "trace.dat";
constexpr const char* kTextName = "trace.txt";
constexpr const char* kToolLog = "trace-cmd.log";
constexpr const char* kTextTailName = "trace-tail.txt";

int64_t now_ms() {
  struct timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1'000'000;
}

bool exists(const std::string& path) {
  struct stat st{};
  return ::lstat(path.c_str(), &st) == 0;
}

// /proc/self/mountinfo escapes blanks and backslashes as \ooo.
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && isdigit(static_cast<unsigned char>(s[i + 1])) &&
        isdigit(static_cast<unsigned char>(s[i + 2])) && isdigit(static_cast<unsigned char>(s[i + 3]))) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Every place where the whole of tracefs is mounted (libtracefs picks the
// first one it meets in /proc/mounts, so all of them are masked).
std::vector<std::string> tracefs_mounts() {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::vector<std::string> tok;
    std::string t;
    while (ss >> t) tok.push_back(t);
    size_t sep = 0;
    while (sep < tok.size() && tok[sep] != "-") ++sep;
    if (tok.size() < 5 || sep + 1 >= tok.size()) continue;
    if (tok[sep + 1] == "tracefs" && tok[3] == "/") out.push_back(unescape(tok[4]));
  }
  return out;
}

std::vector<std::string> dir_entries(const std::string& path) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(path.c_str())) {
    while (struct dirent* de = ::readdir(d))
      if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) out.push_back(de->d_name);
    ::closedir(d);
  }
  return out;
}

// The per-mount flags a bind remount must keep.
unsigned long kept_flags(const std::string& path) {
  struct statvfs sv{};
  if (::statvfs(path.c_str(), &sv) != 0) return 0;
  unsigned long f = 0;
  if (sv.f_flag & ST_NOSUID) f |= MS_NOSUID;
  if (sv.f_flag & ST_NODEV) f |= MS_NODEV;
  if (sv.f_flag & ST_NOEXEC) f |= MS_NOEXEC;
  if (sv.f_flag & ST_NOATIME) f |= MS_NOATIME;
  if (sv.f_flag & ST_NODIRATIME) f |= MS_NODIRATIME;
  if (sv.f_flag & ST_RELATIME) f |= MS_RELATIME;
  return f;
}

std::string tail_of_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  if (s.size() > kMaxToolOutput) s = "..." + s.substr(s.size() - kMaxToolOutput);
  return s;
}

std::string describe_status(int status) {
  if (status == -1) return "exit status unknown";
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

bool copy_fd(int in, int out) {
  char buf[64 * 1024];
  for (;;) {
    ssize_t r = ::read(in, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    if (r == 0) return true;
    for (ssize_t off = 0; off < r;) {
      ssize_t w = ::write(out, buf + off, static_cast<size_t>(r - off));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return false;
      off += w;
    }
  }
}


int64_t fs_size(const std::string& path) {
  struct stat st{};
  return ::lstat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

// The text of a whole ring buffer runs to tens of MB, far past the log
// cap, while the newest events (the jank and what led to it) are what
// matter. When `from` is larger than max_bytes, writes to `to` its leading
// '#' header lines, a note, and its last lines that fit; otherwise leaves
// `to` absent.
bool cut_to_tail(const std::string& from, const std::string& to, size_t max_bytes, std::string& error) {
  const int64_t size = fs_size(from);
  if (size < 0 || static_cast<uint64_t>(size) <= max_bytes) return true;
  Fd in(::open(from.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in) {
    error = "trace: cannot reread " + from + ": " + strerror(errno);
    return false;
  }
  std::string head(4096, '\0');
  ssize_t n = ::pread(in.get(), head.data(), head.size(), 0);
  head.resize(n > 0 ? static_cast<size_t>(n) : 0);
  size_t header_end = 0;
  while (header_end < head.size() && head[header_end] == '#') {
    size_t nl = head.find('\n', header_end);
    if (nl == std::string::npos) break;
    header_end = nl + 1;
  }
  std::string header = head.substr(0, header_end) + "# jankbpf: older events cut to keep the newest " +
                       std::to_string(max_bytes) + " bytes\n";
  if (header.size() >= max_bytes) header.clear();
  off_t start = static_cast<off_t>(size - static_cast<int64_t>(max_bytes - header.size()));
  // Start at a line boundary.
  char c = 0;
  while (start < size && ::pread(in.get(), &c, 1, start) == 1 && c != '\n') ++start;
  ++start;
  Fd out(::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!out || ::write(out.get(), header.data(), header.size()) != static_cast<ssize_t>(header.size()) ||
      ::lseek(in.get(), start, SEEK_SET) < 0 || !copy_fd(in.get(), out.get())) {
    error = "trace: cannot save the text trace in " + to + ": " + strerror(errno);
    return false;
  }
  return true;
}

}  // namespace

TraceCapture::TraceCapture(FtraceInstance& instance, LogDir& logs, CaptureOptions options)
    : instance_(instance), logs_(logs), options_(std::move(options)) {}

TraceCapture::~TraceCapture() {
  if (started_) {
    int status = 0;
    child_.kill(status);
    cleanup_temp();
    std::string ignored;
    if (instance_.active()) instance_.arm(ignored);
  }
}

std::string TraceCapture::find_trace_cmd(const std::string& hint) {
  // Fixed system directories rather than $PATH: the tool runs as root.
  std::vector<std::string> candidates;
  if (!hint.empty())
    candidates.push_back(hint);
  else
    candidates = {"/usr/bin/trace-cmd", "/usr/sbin/trace-cmd", "/usr/local/bin/trace-cmd",
                  "/usr/local/sbin/trace-cmd", "/bin/trace-cmd", "/sbin/trace-cmd"};
  for (const auto& c : candidates) {
    struct stat st{};
    if (::stat(c.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(c.c_str(), X_OK) == 0) return c;
  }
  return "";
}

bool TraceCapture::start(pid_t pid) {
  if (started_) return false;
  started_ = true;
  tool_running_ = false;
  pid_ = pid;
  start_ms_ = now_ms();
  note_.clear();
  temp_error_.clear();
  instance_.pause();  // the capture ends now: nothing newer gets in

  std::string tmpl = options_.temp_base + "/jankbpf-trace-XXXXXX";
  if (::mkdtemp(tmpl.data()) != nullptr)
    temp_dir_ = tmpl;  // mode 0700, a fresh name nobody else can have made
  else
    temp_error_ = strerror(errno);
  if (temp_dir_.empty()) return true;  // finish() reports it

  if (!options_.use_trace_cmd) {
    note_ = "trace-cmd not used (disabled): saved the instance's text trace";
    return true;
  }
  std::string why;
  if (!spawn_trace_cmd(why)) note_ = why + ": saved the instance's text trace";
  return true;
}

bool TraceCapture::spawn_trace_cmd(std::string& why_not) {
  const std::string tool = find_trace_cmd(options_.trace_cmd);
  if (tool.empty()) {
    why_not = options_.trace_cmd.empty() ? "trace-cmd not found"
                                         : "trace-cmd " + options_.trace_cmd + " not found or not executable";
    return false;
  }
  const std::vector<std::string> roots = tracefs_mounts();
  if (roots.empty()) {
    why_not = "no tracefs mount found to isolate trace-cmd from";
    return false;
  }
  const std::string inst = instance_.path();
  const std::vector<std::string> entries = dir_entries(inst);
  if (entries.empty()) {
    why_not = "ftrace instance " + inst + " is gone";
    return false;
  }

  // Order matters: every bind first (their sources live under instances/),
  // then cover instances/, then make the rest read-only.
  SpawnSpec spec;
  spec.private_mounts = true;
  for (const auto& root : roots) {
    if (!exists(root + "/instances/" + instance_.name())) continue;  // not the same tracefs
    for (const auto& e : entries)
      if (exists(root + "/" + e)) spec.mounts.push_back({inst + "/" + e, root + "/" + e, "", MS_BIND, ""});
  }
  if (spec.mounts.empty()) {
    why_not = "no tracefs mount shows instance " + instance_.name();
    return false;
  }
  for (const auto& root : roots)
    spec.mounts.push_back({"none", root + "/instances", "tmpfs",
                           MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555"});
  for (const auto& root : roots)
    spec.mounts.push_back({"", root, "", MS_REMOUNT | MS_BIND | MS_RDONLY | kept_flags(root), ""});
  // trace-cmd flips kernel.kptr_restrict to read kallsyms: not ours to flip.
  spec.mounts.push_back({"/proc/sys", "/proc/sys", "", MS_BIND | MS_REC, ""});
  spec.mounts.push_back({"", "/proc/sys", "", MS_REMOUNT | MS_BIND | MS_RDONLY | kept_flags("/proc/sys"), ""});

  const std::string log_path = temp_dir_ + "/" + kToolLog;
  output_.reset(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  spec.output_fd = output_.get();
  spec.path = tool;
  spec.argv = {tool, "extract", "-o", temp_dir_ + "/" + kDatName};
  spec.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"};
  spec.cwd = temp_dir_;  // trace-cmd writes FILE.cpuN next to FILE
  std::string err;
  if (!child_.start(spec, err)) {
    why_not = err;
    return false;
  }
  tool_running_ = true;
  return true;
}

void TraceCapture::cut_short(int64_t ms) {
  if (!tool_running_) return;
  const int64_t limit = (now_ms() - start_ms_) + std::max<int64_t>(ms, 0);
  if (limit < options_.timeout_ms) {
    options_.timeout_ms = static_cast<int>(limit);
    cut_short_ = true;
  }
}

std::optional<CaptureResult> TraceCapture::finish(bool block) {
  CaptureResult r;
  if (!started_) {
    r.error = "trace: no capture running";
    return r;
  }
  if (tool_running_) {
    int status = 0;
    const int64_t left = options_.timeout_ms - (now_ms() - start_ms_);
    bool timed_out = false;
    if (!child_.wait(block ? static_cast<int>(std::max<int64_t>(left, 0)) : 0, status)) {
      if (!block && left > 0) return std::nullopt;
      child_.kill(status);
      timed_out = true;
    }
    tool_running_ = false;
    output_.reset();
    r.tool_output = tail_of_file(temp_dir_ + "/" + kToolLog);

    const std::string dat = temp_dir_ + "/" + kDatName;
    struct stat st{};
    const bool exited_ok = status == -1 || (WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!timed_out && exited_ok && ::lstat(dat.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      r.format = "dat";
      r.log = logs_.adopt(LogKind::Trace, pid_, dat);
      if (!r.log.ok()) r.format.clear();
    } else if (timed_out && cut_short_) {
      note_ = "jankbpf was stopping: trace-cmd extract was killed after " + std::to_string(options_.timeout_ms) +
              " ms, saved the instance's text trace";
    } else if (timed_out) {
      note_ = "trace-cmd extract timed out after " + std::to_string(options_.timeout_ms) +
              " ms and was killed: saved the instance's text trace";
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == kSpawnSetupFailed) {
      note_ = "could not isolate trace-cmd in a private mount namespace (" + r.tool_output +
              "), and it is never run against the shared tracefs: saved the instance's text trace";
    } else {
      note_ = "trace-cmd extract failed (" + describe_status(status) + "): saved the instance's text trace";
    }
  }
  if (r.format.empty() && r.log.path.empty() && !r.log.over_limit && r.log.error.empty()) {
    if (temp_dir_.empty())
      r.error = "trace: cannot make a private temp dir in " + options_.temp_base + ": " + temp_error_;
    else
      save_text(r);
  }
  r.note = note_;

  std::string err;
  r.rearmed = !stopping_ && instance_.active() && instance_.arm(err);
  if (!r.rearmed && !stopping_ && instance_.active())
    r.note += (r.note.empty() ? "" : "; ") + std::string("re-arming failed: ") + err;
  cleanup_temp();
  started_ = false;
  r.duration_ms = now_ms() - start_ms_;
  return r;
}

void TraceCapture::save_text(CaptureResult& r) {
  Fd in(::open((instance_.path() + "/trace").c_str(), O_RDONLY | O_CLOEXEC));
  if (!in) {
    r.error = "trace: cannot read " + instance_.path() + "/trace: " + strerror(errno);
    return;
  }
  const std::string text = temp_dir_ + "/" + kTextName;
  Fd out(::open(text.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!out || !copy_fd(in.get(), out.get())) {
    r.error = "trace: cannot save the text trace in " + temp_dir_ + ": " + strerror(errno);
    return;
  }
  out.reset();
  // Reading `trace` does not consume it; clear it so the next capture does
  // not repeat this one (trace-cmd's reads consume, so both behave alike).
  if (!stopping_) {
    Fd clear(::open((instance_.path() + "/trace").c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
  }
  std::string saved = text;
  if (!cut_to_tail(text, temp_dir_ + "/" + kTextTailName, options_.text_max_bytes, r.error)) return;
  if (fs_size(temp_dir_ + "/" + kTextTailName) > 0) {
    saved = temp_dir_ + "/" + kTextTailName;
    note_ += (note_.empty() ? "" : "; ") + std::string("text trace cut to its newest ") +
             std::to_string(options_.text_max_bytes) + " bytes";
  }
  r.log = logs_.adopt(LogKind::TraceText, pid_, saved);
  if (r.log.ok()) r.format = "text";
}

void TraceCapture::cleanup_temp() {
  output_.reset();
  if (temp_dir_.empty()) return;
  Fd dir(::open(temp_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir)
    for (const auto& e : dir_entries(temp_dir_)) ::unlinkat(dir.get(), e.c_str(), 0);
  ::rmdir(temp_dir_.c_str());
  temp_dir_.clear();
}

CaptureResult TraceCapture::run(pid_t pid) {
  if (!start(pid)) {
    CaptureResult r;
    r.error = "trace: a capture is already running";
    return r;
  }
  return *finish(true);
}

}  // namespace jankbpf
