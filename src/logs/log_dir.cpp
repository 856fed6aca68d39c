#include "logs/log_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace jankbpf {
namespace {

constexpr mode_t kDirMode = 0750;
constexpr mode_t kFileMode = 0640;
constexpr unsigned kMaxSeq = 100;  // names tried per write before giving up
constexpr int kTimestampDigits = 13;

std::string errno_text() { return strerror(errno); }

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Copies everything from `in` (at its current offset) to `out`.
bool copy_all(int in, int out) {
  char buf[64 * 1024];
  for (;;) {
    ssize_t r = ::read(in, buf, sizeof buf);
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (r == 0) return true;
    if (!write_all(out, buf, static_cast<size_t>(r))) return false;
  }
}

}  // namespace

LogDir::LogDir(LogDirOptions options) : options_(std::move(options)) {}

int64_t LogDir::now_ms() const {
  if (options_.clock_ms) return options_.clock_ms();
  struct timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1'000'000;
}

std::string LogDir::file_name(LogKind kind, pid_t pid, int64_t timestamp_ms, unsigned seq) {
  const char* prefix = kind == LogKind::Stack ? "stack" : "trace";
  const char* ext = kind == LogKind::Trace ? "dat" : "txt";
  char buf[96];
  if (seq == 0)
    snprintf(buf, sizeof buf, "%s-%d-%0*lld.%s", prefix, static_cast<int>(pid), kTimestampDigits,
             static_cast<long long>(timestamp_ms), ext);
  else
    snprintf(buf, sizeof buf, "%s-%d-%0*lld-%u.%s", prefix, static_cast<int>(pid), kTimestampDigits,
             static_cast<long long>(timestamp_ms), seq, ext);
  return buf;
}

bool LogDir::parse_name(std::string_view name, Entry& out) {
  bool stack = name.starts_with("stack-");
  if (!stack && !name.starts_with("trace-")) return false;
  name.remove_prefix(6);
  std::string_view ext;
  if (name.ends_with(".txt"))
    ext = "txt";
  else if (name.ends_with(".dat") && !stack)
    ext = "dat";
  else
    return false;
  name.remove_suffix(4);
  // PID-TIMESTAMP or PID-TIMESTAMP-SEQ
  size_t d1 = name.find('-');
  if (d1 == std::string_view::npos || !all_digits(name.substr(0, d1))) return false;
  std::string_view rest = name.substr(d1 + 1);
  size_t d2 = rest.find('-');
  std::string_view ts = rest.substr(0, d2);
  if (ts.size() < kTimestampDigits || ts.size() > 18 || !all_digits(ts)) return false;
  unsigned seq = 0;
  if (d2 != std::string_view::npos) {
    std::string_view s = rest.substr(d2 + 1);
    if (!all_digits(s) || s.size() > 6) return false;
    seq = static_cast<unsigned>(std::stoul(std::string(s)));
  }
  out.timestamp_ms = std::stoll(std::string(ts));
  out.seq = seq;
  return true;
}

std::string LogDir::error() const {
  std::lock_guard lk(mu_);
  return error_;
}

bool LogDir::open() {
  std::lock_guard lk(mu_);
  std::string err;
  bool ok = ensure_open(err);
  error_ = err;
  return ok;
}

// Walks the path from / (or the cwd) one component at a time, never
// following a link, creating what is missing. The fd of the last component
// is the directory for good: a link swapped in later changes nothing.
bool LogDir::ensure_open(std::string& error) {
  if (dir_) {
    // Removed under us (rm -rf by a user cleaning up): its fd now names a
    // dead directory; walk the path again and recreate it.
    struct stat st{};
    if (::fstat(dir_.get(), &st) == 0 && st.st_nlink > 0) return true;
    dir_.reset();
  }
  const std::string& path = options_.path;
  if (path.empty()) {
    error = "log dir: empty path";
    return false;
  }
  Fd cur(::open(path[0] == '/' ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!cur) {
    error = "log dir " + path + ": " + errno_text();
    return false;
  }
  size_t pos = 0;
  while (pos < path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string::npos) end = path.size();
    std::string comp = path.substr(pos, end - pos);
    pos = end + 1;
    if (comp.empty() || comp == ".") continue;
    if (comp == "..") {
      error = "log dir " + path + ": \"..\" is not allowed in the path";
      return false;
    }
    bool created = false;
    int fd = ::openat(cur.get(), comp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
      if (::mkdirat(cur.get(), comp.c_str(), kDirMode) == 0)
        created = true;
      else if (errno != EEXIST) {
        error = "log dir " + path + ": cannot create \"" + comp + "\": " + errno_text();
        return false;
      }
      fd = ::openat(cur.get(), comp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0) {
      int saved = errno;
      struct stat st{};
      if (::fstatat(cur.get(), comp.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
        error = "log dir " + path + ": \"" + comp +
                "\" is a symlink; jankbpf follows no links here, give the real path";
      else
        error = "log dir " + path + ": \"" + comp + "\": " + strerror(saved);
      return false;
    }
    // mkdir's mode passes through the umask; set it exactly.
    if (created) (void)::fchmod(fd, kDirMode);
    cur.reset(fd);
  }
  dir_ = std::move(cur);
  return true;
}

std::vector<LogDir::Entry> LogDir::list() {
  std::lock_guard lk(mu_);
  return list_locked();
}

std::vector<LogDir::Entry> LogDir::list_locked() {
  std::vector<Entry> out;
  std::string err;
  if (!ensure_open(err)) return out;
  // fdopendir takes the fd it is given; hand it a fresh one on the same dir.
  int fd = ::openat(dir_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return out;
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return out;
  }
  while (struct dirent* de = ::readdir(d)) {
    Entry e;
    if (!parse_name(de->d_name, e)) continue;
    struct stat st{};
    if (::fstatat(dir_.get(), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      continue;  // links, fifos, dirs with our names are neither counted nor aged
    e.name = de->d_name;
    e.bytes = static_cast<uint64_t>(st.st_size);
    out.push_back(std::move(e));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) {
    if (a.timestamp_ms != b.timestamp_ms) return a.timestamp_ms < b.timestamp_ms;
    if (a.seq != b.seq) return a.seq < b.seq;
    return a.name < b.name;
  });
  return out;
}

uint64_t LogDir::used_bytes() {
  std::lock_guard lk(mu_);
  uint64_t total = 0;
  for (const auto& e : list_locked()) total += e.bytes;
  return total;
}

bool LogDir::make_room(uint64_t incoming, LogWrite& result) {
  const uint64_t cap = options_.cap_bytes;
  if (incoming > cap) {
    // Nothing aging could free would make it fit: keep the old files.
    result.over_limit = true;
    return false;
  }
  std::vector<Entry> entries = list_locked();
  uint64_t total = 0;
  for (const auto& e : entries) total += e.bytes;
  unsigned tried = 0;
  for (const auto& e : entries) {
    if (total + incoming <= cap || tried >= options_.max_aged_per_write) break;
    ++tried;
    // Recheck: the name may have been replaced since the listing.
    struct stat st{};
    if (::fstatat(dir_.get(), e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      continue;
    if (::unlinkat(dir_.get(), e.name.c_str(), 0) == 0) {
      total -= std::min<uint64_t>(total, static_cast<uint64_t>(st.st_size));
      result.aged.push_back(e.name);
    }
  }
  if (total + incoming > cap) {
    result.over_limit = true;
    return false;
  }
  return true;
}

Fd LogDir::create(LogKind kind, pid_t pid, std::string& name, std::string& error) {
  const int64_t ts = now_ms();
  for (unsigned seq = 0; seq < kMaxSeq; ++seq) {
    name = file_name(kind, pid, ts, seq);
    int fd = ::openat(dir_.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                      kFileMode);
    if (fd >= 0) {
      (void)::fchmod(fd, kFileMode);  // exact, whatever the umask
      return Fd(fd);
    }
    if (errno != EEXIST) {
      error = "log dir " + options_.path + ": cannot create " + name + ": " + errno_text();
      return Fd();
    }
  }
  error = "log dir " + options_.path + ": no free name for " + file_name(kind, pid, ts) + " after " +
          std::to_string(kMaxSeq) + " tries";
  return Fd();
}

LogWrite LogDir::write(LogKind kind, pid_t pid, std::string_view data) {
  std::lock_guard lk(mu_);
  LogWrite r;
  if (!ensure_open(r.error)) {
    error_ = r.error;
    return r;
  }
  if (!make_room(data.size(), r)) return r;
  std::string name;
  Fd f = create(kind, pid, name, r.error);
  if (!f) return r;
  if (!write_all(f.get(), data.data(), data.size())) {
    r.error = "log dir " + options_.path + ": cannot write " + name + ": " + errno_text();
    ::unlinkat(dir_.get(), name.c_str(), 0);  // no half files
    return r;
  }
  r.path = options_.path + "/" + name;
  r.bytes = data.size();
  return r;
}

LogWrite LogDir::adopt(LogKind kind, pid_t pid, const std::string& source_path) {
  std::lock_guard lk(mu_);
  LogWrite r;
  Fd src(::open(source_path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY));
  if (!src) {
    r.error = "adopt " + source_path + ": " + errno_text();
    return r;
  }
  struct stat st{};
  if (::fstat(src.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    r.error = "adopt " + source_path + ": not a regular file";
    return r;
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (!ensure_open(r.error)) {
    error_ = r.error;
    return r;
  }
  if (!make_room(size, r)) return r;

  // Same filesystem: a rename that never replaces an existing name.
  const int64_t ts = now_ms();
  for (unsigned seq = 0; seq < kMaxSeq; ++seq) {
    std::string name = file_name(kind, pid, ts, seq);
    if (::renameat2(AT_FDCWD, source_path.c_str(), dir_.get(), name.c_str(), RENAME_NOREPLACE) == 0) {
      (void)::fchmod(src.get(), kFileMode);  // same inode, now in the log dir
      r.path = options_.path + "/" + name;
      r.bytes = size;
      return r;
    }
    if (errno == EEXIST) continue;
    if (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EPERM) break;  // copy
    r.error = "adopt " + source_path + " into " + options_.path + ": " + errno_text();
    return r;
  }

  // Another filesystem (or no name left to rename onto): copy into a new
  // O_EXCL file, then drop the source.
  std::string name;
  Fd dst = create(kind, pid, name, r.error);
  if (!dst) return r;
  if (!copy_all(src.get(), dst.get())) {
    r.error = "log dir " + options_.path + ": cannot write " + name + ": " + errno_text();
    ::unlinkat(dir_.get(), name.c_str(), 0);
    return r;
  }
  ::unlink(source_path.c_str());
  r.path = options_.path + "/" + name;
  r.bytes = size;
  return r;
}

}  // namespace jankbpf
