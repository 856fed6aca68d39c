#include "util/lazy_pages.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace jankbpf::util {
namespace {

// Pages filled per fault: a compile unit's DIEs and line program are read
// in order, so the next pages are usually wanted too.
constexpr size_t kFillPages = 16;

// Filled pages kept resident across every region at once. Past this, the
// filled pages are dropped (MADV_DONTNEED) and fault in again when read:
// the file's bytes either way. A stack's walk of one compile unit touches
// a few MB of a C++ binary's DWARF, and a record's samples several units,
// so the copies alone pushed jankbpf's peak RSS past 50 MB (issue 30);
// a refill costs ~20 us per 64 KB from the page cache, and a compressed
// section's up to 512 KB of inflating. At 2 MB, the pages libdw touches in
// libc's compressed debug file (~4 MB inflated) for a spin loop's samples
// were dropped and inflated again every few samples: 2.5 ms of this
// thread's CPU over 175 warm samples, none at 8 MB.
constexpr size_t kResidentBudgetBytes = size_t{8} << 20;

size_t page() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

// JANKBPF_DISABLE=...,lazy_dwarf,... (bpf/features.h's list; tests take the fallback).
bool disabled_by_env() {
  const char* env = getenv("JANKBPF_DISABLE");
  return env && (std::string(",") + env + ",").find(",lazy_dwarf,") != std::string::npos;
}

}  // namespace

struct LazyPages::State {
  struct Region {
    size_t len;
    uint64_t file_off;
    Filler fill;
    // Pages this filler filled (present since): the only ones a trim
    // drops. Pages present before the region was added (bytes the image
    // copied or patched itself) are never dropped.
    std::vector<bool> filled;
  };
  std::mutex mu;  // held while a fault is served: remove() waits for it
  std::map<uintptr_t, Region> regions;
  int uffd = -1;
  std::string why;  // why not available
  bool started = false;
  std::atomic<uint64_t> filled{0};
  std::atomic<uint64_t> trims{0};
  size_t resident = 0;  // pages filled and not dropped since
  std::vector<char> buf;

  bool start() {
    if (started) return uffd >= 0;
    started = true;
    if (disabled_by_env()) {
      why = "disabled by JANKBPF_DISABLE";
      return false;
    }
    int fd = static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC));
    if (fd < 0) {
      why = std::string("userfaultfd: ") + strerror(errno);
      return false;
    }
    uffdio_api api{};
    api.api = UFFD_API;
    if (::ioctl(fd, UFFDIO_API, &api) != 0) {
      why = std::string("UFFDIO_API: ") + strerror(errno);
      ::close(fd);
      return false;
    }
    buf.resize(kFillPages * page());
    uffd = fd;  // before the thread reads it
    // The thread takes no signals: it starts whenever an ELF file is first
    // read, perhaps before its caller blocked SIGCHLD, and a thread that
    // left SIGCHLD unblocked would swallow a watched command's exit.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    try {
      std::thread([this] { serve(); }).detach();
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
    } catch (const std::exception& e) {
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
      why = std::string("no thread to serve faults: ") + e.what();
      uffd = -1;
      ::close(fd);
      return false;
    }
    return true;
  }

  // The faulting page and up to kFillPages - 1 after it, within its region.
  void fill_at(uintptr_t addr) {
    std::lock_guard lk(mu);
    auto it = regions.upper_bound(addr);
    const size_t ps = page();
    if (it == regions.begin() || addr >= std::prev(it)->first + std::prev(it)->second.len) {
      // Removed meanwhile (its owner is gone): unblock the thread with zeros.
      uffdio_zeropage z{};
      z.range.start = addr;
      z.range.len = ps;
      if (::ioctl(uffd, UFFDIO_ZEROPAGE, &z) != 0) wake(addr);
      return;
    }
    --it;
    Region& r = it->second;
    const uintptr_t end = it->first + r.len;
    size_t n = std::min<size_t>(kFillPages * ps, end - addr);
    if ((resident + n / ps) * ps > kResidentBudgetBytes) trim();
    size_t got = 0;
    try {
      got = r.fill(r.file_off + (addr - it->first), buf.data(), n);
    } catch (...) {
      got = 0;
    }
    if (got > n) got = 0;
    std::memset(buf.data() + got, 0, n - got);
    const size_t first = (addr - it->first) / ps;
    if (copy(addr, n)) {
      mark(r, first, n / ps);
      return;
    }
    // A page after the faulting one was already there: the faulting one alone.
    if (n > ps && copy(addr, ps)) {
      mark(r, first, 1);
      return;
    }
    wake(addr);  // filled by another fault meanwhile
  }

  bool copy(uintptr_t addr, size_t n) {
    uffdio_copy c{};
    c.dst = addr;
    c.src = reinterpret_cast<uintptr_t>(buf.data());
    c.len = n;
    if (::ioctl(uffd, UFFDIO_COPY, &c) == 0) {
      filled += n / page();
      return true;
    }
    return false;
  }

  void mark(Region& r, size_t first, size_t count) {
    for (size_t i = first; i < first + count && i < r.filled.size(); ++i)
      if (!r.filled[i]) {
        r.filled[i] = true;
        ++resident;
      }
  }

  // Drops every filled page (under mu). A thread reading one meanwhile
  // faults and has it filled again.
  void trim() {
    const size_t ps = page();
    for (auto& [start, r] : regions) {
      for (size_t i = 0; i < r.filled.size();) {
        if (!r.filled[i]) {
          ++i;
          continue;
        }
        size_t j = i;
        while (j < r.filled.size() && r.filled[j]) r.filled[j++] = false;
        ::madvise(reinterpret_cast<void*>(start + i * ps), (j - i) * ps, MADV_DONTNEED);
        i = j;
      }
    }
    resident = 0;
    ++trims;
  }

  void wake(uintptr_t addr) {
    uffdio_range r{addr, page()};
    ::ioctl(uffd, UFFDIO_WAKE, &r);
  }

  // Never returns: a thread faulting in a region waits for this one.
  void serve() {
    for (;;) {
      uffd_msg msg;
      ssize_t n = ::read(uffd, &msg, sizeof msg);
      if (n != static_cast<ssize_t>(sizeof msg)) {
        if (n < 0 && errno != EINTR && errno != EAGAIN) ::usleep(10000);  // not expected: no spin
        continue;
      }
      if (msg.event != UFFD_EVENT_PAGEFAULT) continue;
      fill_at(static_cast<uintptr_t>(msg.arg.pagefault.address) & ~static_cast<uintptr_t>(page() - 1));
    }
  }
};

LazyPages::LazyPages() : s_(new State) {}

LazyPages& LazyPages::get() {
  static LazyPages* lp = new LazyPages;  // never destroyed: its thread serves until exit
  return *lp;
}

bool LazyPages::available(std::string* why) {
  std::lock_guard lk(s_->mu);
  bool ok = s_->start();
  if (!ok && why) *why = s_->why;
  return ok;
}

bool LazyPages::add(void* addr, size_t len, uint64_t file_off, Filler fill) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  if (!len || a % page() || len % page() || !fill) return false;
  std::lock_guard lk(s_->mu);
  if (!s_->start()) return false;
  uffdio_register reg{};
  reg.range.start = a;
  reg.range.len = len;
  reg.mode = UFFDIO_REGISTER_MODE_MISSING;
  if (::ioctl(s_->uffd, UFFDIO_REGISTER, &reg) != 0) return false;
  if (!(reg.ioctls & (uint64_t{1} << _UFFDIO_COPY))) {
    uffdio_range r{a, len};
    ::ioctl(s_->uffd, UFFDIO_UNREGISTER, &r);
    return false;
  }
  s_->regions[a] = State::Region{len, file_off, std::move(fill), std::vector<bool>(len / page(), false)};
  return true;
}

void LazyPages::remove(void* addr) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  std::lock_guard lk(s_->mu);
  auto it = s_->regions.find(a);
  if (it == s_->regions.end()) return;
  for (bool f : it->second.filled) s_->resident -= f ? 1 : 0;
  uffdio_range r{a, it->second.len};
  ::ioctl(s_->uffd, UFFDIO_UNREGISTER, &r);
  s_->regions.erase(it);
}

uint64_t LazyPages::pages_filled() const { return s_->filled.load(); }

uint64_t LazyPages::trims() const { return s_->trims.load(); }

size_t LazyPages::resident_budget_bytes() { return kResidentBudgetBytes; }

}  // namespace jankbpf::util
