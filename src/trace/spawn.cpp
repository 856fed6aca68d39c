#include "trace/spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace jankbpf {
namespace {

// ---- child side: raw system calls only between fork and execve ---------

void put(int fd, const char* s) {
  if (fd >= 0 && s) (void)!::write(fd, s, strlen(s));
}

void put_num(int fd, long n) {
  char buf[24];
  int i = sizeof buf;
  buf[--i] = '\0';
  bool neg = n < 0;
  unsigned long u = neg ? static_cast<unsigned long>(-n) : static_cast<unsigned long>(n);
  do {
    buf[--i] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u && i > 1);
  if (neg) buf[--i] = '-';
  put(fd, buf + i);
}

[[noreturn]] void child_fail(int fd, const char* what, const char* target, int err, int code) {
  put(fd, "jankbpf: before running the tool: ");
  put(fd, what);
  if (target) {
    put(fd, " ");
    put(fd, target);
  }
  put(fd, ": errno ");
  put_num(fd, err);
  put(fd, "\n");
  _exit(code);
}

struct PreparedMount {
  const char* source;
  const char* target;
  const char* fstype;
  unsigned long flags;
  const char* data;
};

[[noreturn]] void run_child(const SpawnSpec& spec, char* const* argv, char* const* envp,
                            const PreparedMount* mounts, size_t n_mounts, int devnull, pid_t parent) {
  const int out = spec.output_fd >= 0 ? spec.output_fd : devnull;
  // The parent may block signals (signalfd) or ignore some; the tool gets
  // the defaults, as if started from a shell.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) sigaction(s, &dfl, nullptr);
  // Dies with jankbpf rather than holding our instance busy as an orphan,
  // and keeps out of the terminal's process group (a Ctrl-C is for jankbpf,
  // which then decides what to do with the capture).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(kSpawnSetupFailed);
  setpgid(0, 0);

  if (spec.private_mounts) {
    if (unshare(CLONE_NEWNS) != 0) child_fail(out, "unshare(CLONE_NEWNS)", nullptr, errno, kSpawnSetupFailed);
    // Private first, so none of what follows propagates to the host.
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
      child_fail(out, "make / private", nullptr, errno, kSpawnSetupFailed);
    for (size_t i = 0; i < n_mounts; ++i) {
      const PreparedMount& m = mounts[i];
      if (mount(m.source, m.target, m.fstype, m.flags, m.data) != 0)
        child_fail(out, "mount", m.target, errno, kSpawnSetupFailed);
    }
  }
  if (dup2(spec.input_fd >= 0 ? spec.input_fd : devnull, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
    child_fail(out, "dup2", nullptr, errno, kSpawnSetupFailed);
  // Only 0-2 go to the tool: a descriptor some library opened without
  // O_CLOEXEC (another process's ELF, a BPF map) must not leak into it.
  if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0)
    for (int fd = 3; fd < 65536; ++fd) close(fd);
  if (!spec.cwd.empty() && chdir(spec.cwd.c_str()) != 0)
    child_fail(1, "chdir", spec.cwd.c_str(), errno, kSpawnSetupFailed);
  execve(spec.path.c_str(), argv, envp);
  child_fail(1, "execve", spec.path.c_str(), errno, kSpawnExecFailed);
}

const char* or_null(const std::string& s) { return s.empty() ? nullptr : s.c_str(); }

int64_t now_ms() {
  struct timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1'000'000;
}

}  // namespace

Child::~Child() { reap_or_kill(); }

void Child::reap_or_kill() {
  if (pid_ > 0) {
    int status = 0;
    kill(status);
  }
}

bool Child::start(const SpawnSpec& spec, std::string& error) {
  reap_or_kill();
  if (spec.path.empty() || spec.argv.empty()) {
    error = "spawn: no program given";
    return false;
  }
  // Everything the child needs, allocated now: after fork it may not malloc.
  std::vector<char*> argv, envp;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  std::vector<PreparedMount> mounts;
  for (const auto& m : spec.mounts)
    mounts.push_back({or_null(m.source), m.target.c_str(), or_null(m.fstype), m.flags, or_null(m.data)});
  Fd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devnull) {
    error = std::string("spawn: /dev/null: ") + strerror(errno);
    return false;
  }
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    error = std::string("spawn ") + spec.path + ": fork: " + strerror(errno);
    return false;
  }
  if (pid == 0) run_child(spec, argv.data(), envp.data(), mounts.data(), mounts.size(), devnull.get(), parent);
  pid_ = pid;
  pidfd_.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  return true;
}

bool Child::wait(int timeout_ms, int& status) {
  if (pid_ <= 0) return false;
  const int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
  for (;;) {
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      // ECHILD: SIGCHLD is ignored by this process, so the kernel reaped it
      // and the status is gone.
      if (r < 0) status = -1;
      pid_ = -1;
      pidfd_.reset();
      return true;
    }
    int64_t left = deadline < 0 ? 1000 : deadline - now_ms();
    if (left <= 0) return false;
    if (pidfd_) {
      struct pollfd p{pidfd_.get(), POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(left));  // EINTR: loop and look again
    } else {
      struct timespec ts{0, 5'000'000};
      nanosleep(&ts, nullptr);
    }
  }
}

void Child::kill(int& status) {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  for (;;) {
    pid_t r = ::waitpid(pid_, &status, 0);
    if (r == pid_) break;
    if (r < 0 && errno != EINTR) {
      status = -1;
      break;
    }
  }
  pid_ = -1;
  pidfd_.reset();
}

}  // namespace jankbpf
