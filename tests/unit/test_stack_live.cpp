// The stack library on REAL samples: a purpose-built target
// (tests/apps/stack_target.c, -O2 -fomit-frame-pointer) sampled with
// perf_event_open exactly as jankbpf's sampler takes them (cpu-clock,
// PERF_SAMPLE_REGS_USER with the arch table's mask, 16 KB of user stack,
// the kernel callchain), and the off-CPU case from a sched_switch
// tracepoint sample (the same registers + stack copy BPF takes at switch-out).
// Needs root (perf on another process, /proc/PID/map_files).
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "arch/regs.h"
#include "stack/maps.h"
#include "stack/perf_sample.h"
#include "stack/resolver.h"
#include "stack/tree.h"
#include "util/tracefs.h"
#include "skip.h"

using namespace jankbpf;
using namespace jankbpf::stack;

namespace {

constexpr uint32_t kStackBytes = 16384;

// --- the target -------------------------------------------------------------

bool newer(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  if (::stat(a.c_str(), &sa) != 0) return false;
  if (::stat(b.c_str(), &sb) != 0) return true;
  return sa.st_mtime >= sb.st_mtime;
}

// build/tests/stack_target from `make apps`, or a fresh build with the same
// flags when it is missing or stale.
std::string target_binary() {
  const std::string src = "tests/apps/stack_target.c";
  std::vector<std::string> cands;
  if (const char* b = std::getenv("JANKBPF_BUILD")) cands.push_back(std::string(b) + "/tests/stack_target");
  cands.push_back("build/tests/stack_target");
  for (const auto& c : cands)
    if (newer(c, src)) return c;
  static std::string built;
  if (!built.empty()) return built;
  char dir[] = "/tmp/jankbpf-stack-XXXXXX";
  if (!::mkdtemp(dir)) return "";
  std::string out = std::string(dir) + "/stack_target";
  std::string cmd = "gcc -O2 -g -fomit-frame-pointer -pthread -Wall " + src + " -o " + out + " -lm";
  if (std::system(cmd.c_str()) != 0) return "";
  built = out;
  return built;
}

struct Child {
  pid_t pid = -1;
  int in = -1;   // its stdin (we write)
  int out = -1;  // its stdout (we read)

  ~Child() { stop(); }
  void go() { REQUIRE(::write(in, "g", 1) == 1); }
  // Reads stdout until `word` shows up (or timeout).
  bool wait_for(const std::string& word, int timeout_ms = 10000) {
    std::string got;
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{out, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) {
        char buf[256];
        ssize_t n = ::read(out, buf, sizeof buf);
        if (n <= 0) return false;
        got.append(buf, static_cast<size_t>(n));
        if (got.find(word) != std::string::npos) return true;
      }
    }
    return false;
  }
  void stop() {
    if (in >= 0) ::close(in);
    in = -1;
    if (pid > 0) {
      int st;
      for (int i = 0; i < 100 && ::waitpid(pid, &st, WNOHANG) == 0; ++i) ::usleep(10000);
      if (::waitpid(pid, &st, WNOHANG) == 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &st, 0);
      }
    }
    pid = -1;
    if (out >= 0) ::close(out);
    out = -1;
  }
};

void spawn(Child& c, std::vector<std::string> args, std::string bin = "") {
  if (bin.empty()) bin = target_binary();
  REQUIRE(!bin.empty());
  int to[2], from[2];
  REQUIRE(::pipe2(to, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(from, O_CLOEXEC) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(to[0], 0);
    ::dup2(from[1], 1);
    std::vector<char*> argv;
    argv.push_back(bin.data());
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(to[0]);
  ::close(from[1]);
  c.pid = pid;
  c.in = to[1];
  c.out = from[0];
}

// --- perf sampling ----------------------------------------------------------

struct Sample {
  uint32_t pid = 0, tid = 0;
  uint64_t abi = 0;
  std::vector<uint64_t> regs;
  std::vector<uint8_t> stack;
  uint64_t dyn_size = 0;
  std::vector<uint64_t> callchain;

  SampleInput input(uint64_t mask) const {
    SampleInput in;
    in.pid = static_cast<pid_t>(pid);
    in.tid = static_cast<pid_t>(tid);
    in.regs_abi = abi;
    in.regs_mask = mask;
    in.regs = regs;
    in.stack = stack;
    in.stack_dyn_size = dyn_size;
    in.kernel_callchain = callchain;
    return in;
  }
};

class PerfSampler {
 public:
  // cpu-clock every `period_ns` of the target's CPU time, or (tracepoint
  // != 0) every hit of that tracepoint id.
  PerfSampler(pid_t pid, uint64_t period_ns, uint64_t tracepoint = 0) {
    perf_event_attr a{};
    a.size = sizeof a;
    if (tracepoint) {
      a.type = PERF_TYPE_TRACEPOINT;
      a.config = tracepoint;
      a.sample_period = 1;
    } else {
      a.type = PERF_TYPE_SOFTWARE;
      a.config = PERF_COUNT_SW_CPU_CLOCK;
      a.sample_period = period_ns;
    }
    a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN |
                    PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
    sample_type_ = a.sample_type;
    a.sample_regs_user = mask();
    a.sample_stack_user = kStackBytes;
    a.exclude_callchain_user = 1;  // the user part is ours to unwind
    a.disabled = 0;
    a.wakeup_events = 1;
    fd_ = static_cast<int>(::syscall(SYS_perf_event_open, &a, pid, -1, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd_ < 0) return;
    page_ = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    size_ = page_ * (1 + kDataPages);
    base_ = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (base_ == MAP_FAILED) base_ = nullptr;
  }
  ~PerfSampler() {
    if (base_) ::munmap(base_, size_);
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0 && base_; }
  static uint64_t mask() { return reg_table(host_arch().arch).sample_regs_user; }

  // Moves every complete record out of the ring.
  void drain() {
    auto* meta = static_cast<perf_event_mmap_page*>(base_);
    auto* data = static_cast<uint8_t*>(base_) + page_;
    uint64_t data_size = page_ * kDataPages;
    uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = meta->data_tail;
    std::vector<uint8_t> rec;
    while (tail + sizeof(perf_event_header) <= head) {
      perf_event_header h;
      copy_out(data, data_size, tail, &h, sizeof h);
      if (h.size < sizeof h || tail + h.size > head) break;
      rec.resize(h.size);
      copy_out(data, data_size, tail, rec.data(), h.size);
      if (h.type == PERF_RECORD_SAMPLE) parse(rec);
      else if (h.type == PERF_RECORD_LOST) ++lost;
      tail += h.size;
    }
    __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
  }
  // Drains until `until` returns true or `ms` pass.
  template <class F>
  void run(int ms, F until) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      ::poll(&p, 1, 10);
      drain();
      if (until()) break;
    }
    drain();
  }

  std::vector<Sample> samples;
  uint64_t lost = 0, bad = 0;

 private:
  static constexpr size_t kDataPages = 2048;  // 8 MiB

  static void copy_out(const uint8_t* data, uint64_t size, uint64_t pos, void* out, size_t len) {
    uint64_t off = pos % size;
    size_t first = static_cast<size_t>(std::min<uint64_t>(len, size - off));
    std::memcpy(out, data + off, first);
    std::memcpy(static_cast<uint8_t*>(out) + first, data, len - first);
  }

  void parse(const std::vector<uint8_t>& rec) {
    PerfSampleView v;
    if (!parse_perf_sample(rec, sample_type_, mask(), v)) {
      ++bad;
      return;
    }
    Sample s;
    s.pid = v.pid;
    s.tid = v.tid;
    s.abi = v.regs_abi;
    s.regs.assign(v.regs.begin(), v.regs.end());
    s.stack.assign(v.stack.begin(), v.stack.end());
    s.dyn_size = v.stack_dyn_size;
    s.callchain.assign(v.callchain.begin(), v.callchain.end());
    samples.push_back(std::move(s));
  }

  uint64_t sample_type_ = 0;
  int fd_ = -1;
  void* base_ = nullptr;
  size_t page_ = 4096, size_ = 0;
};

// Samples the child until it writes to stdout (its task is over) or ms
// pass; true when it wrote.
bool sample_until_output(PerfSampler& ps, const Child& c, int ms) {
  bool done = false;
  ps.run(ms, [&] {
    pollfd p{c.out, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) done = true;
    return done;
  });
  return done;
}

std::vector<ResolvedStack> resolve_all(Resolver& r, const std::vector<Sample>& samples) {
  std::vector<ResolvedStack> out;
  for (const auto& s : samples) out.push_back(r.resolve(s.input(PerfSampler::mask())));
  return out;
}

bool names(const Frame& f, const std::string& fn) { return f.symbol == fn; }

// Index of the first frame named fn at or after `from`, or -1.
int find_frame(const ResolvedStack& s, const std::string& fn, size_t from = 0) {
  for (size_t i = from; i < s.frames.size(); ++i)
    if (names(s.frames[i], fn)) return static_cast<int>(i);
  return -1;
}

std::string dump(const ResolvedStack& s) {
  std::string out = "stop=" + std::string(to_string(s.stop)) + " " + s.error + "\n";
  for (const auto& f : s.frames) out += "  " + StackTree::format_frame(f, true) + "\n";
  return out;
}

}  // namespace

TEST_CASE("live x86_64 samples: main -> outer -> middle -> inner, heaviest stack", "[stack][live]") {
  SKIP_UNLESS(::geteuid() == 0, "needs root");
  Child c;
  spawn(c, {"deep", "700"});
  PerfSampler ps(c.pid, 2'000'000);
  REQUIRE(ps.ok());
  c.go();
  bool done = sample_until_output(ps, c, 10000);
  REQUIRE(c.wait_for("done", 100) | done);
  REQUIRE(ps.samples.size() >= 50);
  CHECK(ps.bad == 0);

  Resolver r;
  auto stacks = resolve_all(r, ps.samples);
  StackTree tree;
  size_t complete = 0, reach_main = 0;
  for (const auto& s : stacks) {
    tree.add(s);
    if (s.stop == UnwindStop::Complete) ++complete;
    int i = find_frame(s, "inner");
    if (i >= 0) {
      int m = find_frame(s, "middle", static_cast<size_t>(i));
      int o = m >= 0 ? find_frame(s, "outer", static_cast<size_t>(m)) : -1;
      int mn = o >= 0 ? find_frame(s, "main", static_cast<size_t>(o)) : -1;
      if (mn > o && o > m && m > i) ++reach_main;
    }
  }
  INFO("first stack:\n" << dump(stacks.front()));
  INFO("tree:\n" << tree.render());
  // Every sample is in inner (or the vDSO clock it calls) and unwinds to
  // the outermost frame without frame pointers.
  CHECK(reach_main >= stacks.size() * 95 / 100);
  CHECK(complete >= stacks.size() * 95 / 100);

  std::string heaviest = tree.heaviest_stack();
  INFO("heaviest:\n" << heaviest);
  size_t pi = heaviest.find("(inner+");
  size_t pm = heaviest.find("(middle+");
  size_t po = heaviest.find("(outer+");
  size_t pn = heaviest.find("(main+");
  REQUIRE(pi != std::string::npos);
  REQUIRE(pm != std::string::npos);
  REQUIRE(po != std::string::npos);
  REQUIRE(pn != std::string::npos);
  CHECK(pi < pm);
  CHECK(pm < po);
  CHECK(po < pn);
  // The heaviest path is leaf first and its leaf is inner itself.
  CHECK(heaviest.rfind("#00 ", 0) == 0);
  CHECK(heaviest.substr(0, heaviest.find('\n')).find("(inner+") != std::string::npos);

  // The tree: root first; counts never exceed the number of samples.
  auto lines = tree.lines();
  REQUIRE(!lines.empty());
  std::map<int, uint64_t> per_level;
  for (const auto& l : lines) {
    per_level[l.level] += l.count;
    CHECK(l.count <= tree.samples());
  }
  for (auto [level, sum] : per_level) CHECK(sum <= tree.samples());
  CHECK(lines.front().level == 0);
  REQUIRE(lines.front().frame);
  CHECK(lines.front().frame->symbol == "_start");  // outermost frame is the root
  // Build-id and module path as in the seed's lines.
  std::string text = tree.render();
  CHECK(text.find("stack_target(main+") != std::string::npos);
  CHECK(text.find("    ") != std::string::npos);

  // file:line from DWARF (the target is built with -g), on the first
  // sample in inner (one of the few elsewhere may come first: a page fault
  // of the child's start, in the kernel).
  auto in_inner = std::find_if(stacks.begin(), stacks.end(), [](const ResolvedStack& s) {
    return find_frame(s, "inner") >= 0;
  });
  REQUIRE(in_inner != stacks.end());
  const ResolvedStack& s0 = *in_inner;
  int ii = find_frame(s0, "inner");
  CHECK(s0.frames[static_cast<size_t>(ii)].file.find("stack_target.c") != std::string::npos);
  CHECK(s0.frames[static_cast<size_t>(ii)].line > 0);
  CHECK(!s0.frames[static_cast<size_t>(ii)].build_id.empty());

  // Speed: unwind + symbolize one 16 KB sample, warm.
  auto t0 = std::chrono::steady_clock::now();
  size_t frames = 0;
  for (const auto& s : ps.samples) frames += r.resolve(s.input(PerfSampler::mask())).frames.size();
  auto t1 = std::chrono::steady_clock::now();
  double us = std::chrono::duration<double, std::micro>(t1 - t0).count() / static_cast<double>(ps.samples.size());
  std::printf("[stack] warm resolve: %.1f us/sample (%zu samples, %.1f frames/sample)\n", us, ps.samples.size(),
              static_cast<double>(frames) / static_cast<double>(ps.samples.size()));
  CHECK(us < 1000.0);
}

TEST_CASE("live x86_64: samples unwound after the process exited, from maps read while it lived",
          "[stack][live]") {
  // On a slow machine the reporter may reach a short process's samples
  // only after it exited (the arm64 lane saw it): /proc/PID/maps, map_files
  // and root are gone then. The maps read when its task turned long, and
  // its files found again by device and inode, still name every frame.
  SKIP_UNLESS(::geteuid() == 0, "needs root");
  Child c;
  spawn(c, {"deep", "400"});
  PerfSampler ps(c.pid, 2'000'000);
  REQUIRE(ps.ok());
  const pid_t pid = c.pid;
  // As jankbpf reads them: once the program runs (exec done), before it exits.
  std::string early;
  const std::string bin = std::filesystem::path(target_binary()).filename().string();
  for (int i = 0; i < 200 && early.find(bin) == std::string::npos; ++i) {
    early.clear();
    REQUIRE(read_small_file("/proc/" + std::to_string(pid) + "/maps", early));
    if (early.find(bin) == std::string::npos) ::usleep(10000);
  }
  REQUIRE(early.find(bin) != std::string::npos);
  c.go();
  sample_until_output(ps, c, 10000);
  REQUIRE(ps.samples.size() >= 20);
  c.stop();  // exited and reaped: nothing of it left under /proc
  REQUIRE(::access(("/proc/" + std::to_string(pid)).c_str(), F_OK) != 0);

  auto reach_main = [](const std::vector<ResolvedStack>& stacks) {
    size_t n = 0;
    for (const auto& s : stacks) n += find_frame(s, "inner") >= 0 && find_frame(s, "main") > find_frame(s, "inner");
    return n;
  };
  Resolver late;  // what the reporter had before: nothing to go on
  late.prepare(pid, host_arch().arch);
  CHECK(reach_main(resolve_all(late, ps.samples)) == 0);

  Resolver r;
  r.prepare(pid, host_arch().arch, early);
  auto stacks = resolve_all(r, ps.samples);
  INFO("first stack:\n" << dump(stacks.front()));
  CHECK(reach_main(stacks) >= stacks.size() * 95 / 100);
}

TEST_CASE("live x86_64 samples: A 400 ms then B 100 ms, counts in proportion", "[stack][live]") {
  SKIP_UNLESS(::geteuid() == 0, "needs root");
  Child c;
  spawn(c, {"ab", "400", "100"});
  PerfSampler ps(c.pid, 2'000'000);
  REQUIRE(ps.ok());
  c.go();
  sample_until_output(ps, c, 10000);
  REQUIRE(ps.samples.size() >= 50);
  Resolver r;
  StackTree tree(TreeOptions{TreeOptions::Merge::Function});
  StackTree by_pc;
  for (const auto& s : resolve_all(r, ps.samples)) {
    tree.add(s);
    by_pc.add(s);
  }
  uint64_t a = 0, b = 0;
  for (const auto& l : tree.lines()) {
    if (!l.frame) continue;
    if (l.frame->symbol == "func_a") a += l.count;
    if (l.frame->symbol == "func_b") b += l.count;
  }
  INFO("tree:\n" << tree.render());
  REQUIRE(a > 0);
  REQUIRE(b > 0);
  double ratio = static_cast<double>(a) / static_cast<double>(b);
  CHECK(ratio > 2.5);
  CHECK(ratio < 6.5);
  // Both hang off long_task, which holds every sample.
  std::string text = by_pc.render();
  CHECK(text.find("(func_a+") != std::string::npos);
  CHECK(text.find("(func_b+") != std::string::npos);
  CHECK(text.find("(long_task+") != std::string::npos);
}

TEST_CASE("live x86_64 JIT: frame pointers through anonymous code, names from perf map", "[stack][live]") {
  SKIP_UNLESS(::geteuid() == 0, "needs root");
  Child c;
  spawn(c, {"jit", "400"});
  PerfSampler ps(c.pid, 2'000'000);
  REQUIRE(ps.ok());
  c.go();
  sample_until_output(ps, c, 10000);
  REQUIRE(ps.samples.size() >= 30);
  Resolver r;
  StackTree tree;
  size_t through = 0, in_leaf = 0;
  std::string example;
  for (const auto& s : resolve_all(r, ps.samples)) {
    tree.add(s);
    int leaf = find_frame(s, "jit_leaf");
    if (leaf < 0) continue;
    ++in_leaf;
    int j = find_frame(s, "jitBusy", static_cast<size_t>(leaf));
    int run = j >= 0 ? find_frame(s, "run_jit", static_cast<size_t>(j)) : -1;
    int mn = run >= 0 ? find_frame(s, "main", static_cast<size_t>(run)) : -1;
    if (mn > run && run > j && j > leaf) {
      ++through;
      const Frame& jf = s.frames[static_cast<size_t>(j)];
      CHECK(jf.jit());
      CHECK(jf.file == "/srv/app/busy.js");
      CHECK(jf.line == 12);
      CHECK(jf.column == 7);
    }
    if (example.empty()) example = dump(s);
  }
  INFO("example:\n" << example << "tree:\n" << tree.render());
  REQUIRE(in_leaf > 0);
  CHECK(through >= in_leaf * 9 / 10);
  CHECK(tree.render().find(" at jitBusy (/srv/app/busy.js:12:7)") != std::string::npos);
}

TEST_CASE("live x86_64 off-CPU: sched_switch sample of a thread blocked in read()", "[stack][live][tracefs]") {
  SKIP_UNLESS(::geteuid() == 0, "needs root");
  // The tracepoint's id, from tracefs found or mounted here as jankbpf does
  // (never from a mount an earlier case happened to make).
  std::string err;
  const std::string& root = tracefs::root(&err);
  SKIP_UNLESS(!root.empty(), "no tracefs: " << err);
  std::string id_text;
  std::ifstream(root + "/events/sched/sched_switch/id") >> id_text;
  REQUIRE(!id_text.empty());
  Child c;
  spawn(c, {"block"});
  PerfSampler ps(c.pid, 0, std::stoull(id_text));
  REQUIRE(ps.ok());
  c.go();
  REQUIRE(c.wait_for("blocking"));
  ps.run(1000, [] { return false; });
  REQUIRE(!ps.samples.empty());
  Resolver r;
  // The last switch-out is the one into the blocking read.
  SampleInput in = ps.samples.back().input(PerfSampler::mask());
  in.wait_state = 'S';
  ResolvedStack s = r.resolve(in);
  INFO(dump(s));
  REQUIRE(s.kernel_frames > 0);
  bool sched = false, pipe = false;
  for (size_t i = 0; i < s.kernel_frames; ++i) {
    CHECK(s.frames[i].kernel());
    if (s.frames[i].symbol.find("schedule") != std::string::npos) sched = true;
    if (s.frames[i].symbol.find("pipe_read") != std::string::npos) pipe = true;  // anon_pipe_read on 6.14+
  }
  CHECK(sched);
  CHECK(pipe);
  int w = find_frame(s, "wait_input", s.kernel_frames);
  int b = find_frame(s, "blocker");
  int m = find_frame(s, "main");
  CHECK(w >= 0);
  CHECK(b > w);
  CHECK(m > b);
  CHECK(s.stop == UnwindStop::Complete);
  StackTree tree;
  tree.add(s);
  std::string text = tree.render();
  INFO(text);
  CHECK(text.find("wait S (sleeping)") != std::string::npos);
  CHECK(text.find("[kernel.kallsyms](") != std::string::npos);
  CHECK(tree.heaviest_stack().rfind("#00 wait S", 0) == 0);
}

namespace {

// Samples a `deep` run of `bin` (spawned with `prefix` in front) until it
// says done; returns the resolved stacks.
std::vector<ResolvedStack> sample_run(Child& c, pid_t target, int period_ms = 2) {
  PerfSampler ps(target, static_cast<uint64_t>(period_ms) * 1'000'000);
  REQUIRE(ps.ok());
  c.go();
  sample_until_output(ps, c, 10000);
  REQUIRE(ps.samples.size() >= 30);
  Resolver r;
  return resolve_all(r, ps.samples);
}

size_t count_chain(const std::vector<ResolvedStack>& stacks, const std::vector<std::string>& chain) {
  size_t n = 0;
  for (const auto& s : stacks) {
    size_t at = 0;
    bool ok = true;
    for (const auto& fn : chain) {
      int i = find_frame(s, fn, at);
      if (i < 0) {
        ok = false;
        break;
      }
      at = static_cast<size_t>(i) + 1;
    }
    if (ok) ++n;
  }
  return n;
}

// The pid of the first process whose parent is `ppid` (scanning /proc).
pid_t child_of(pid_t ppid) {
  for (int tries = 0; tries < 200; ++tries) {
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
      std::string name = e.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream f(e.path() / "stat");
      std::string stat;
      std::getline(f, stat);
      size_t rp = stat.rfind(')');
      if (rp == std::string::npos) continue;
      std::istringstream rest(stat.substr(rp + 2));
      std::string state;
      long parent = 0;
      rest >> state >> parent;
      if (parent == ppid) return static_cast<pid_t>(std::stol(name));
    }
    ::usleep(10000);
  }
  return -1;
}

}  // namespace

TEST_CASE("live x86_64: a deleted and replaced binary is still read through map_files", "[stack][live]") {
  SKIP_UNLESS(::geteuid() == 0, "needs root");
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/jankbpf-deleted-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  std::string bin = dir + "/app";
  fs::copy_file(target_binary(), bin);
  Child c;
  spawn(c, {"deep", "300"}, bin);
  // Gone from disk, and another file in its place (an upgrade in place).
  ::usleep(50000);
  fs::remove(bin);
  fs::copy_file("/bin/true", bin);
  auto stacks = sample_run(c, c.pid);
  INFO(dump(stacks.front()));
  CHECK(count_chain(stacks, {"inner", "middle", "outer", "main"}) >= stacks.size() * 9 / 10);
  int i = find_frame(stacks.front(), "inner");
  REQUIRE(i >= 0);
  CHECK(stacks.front().frames[static_cast<size_t>(i)].module == bin);
  fs::remove_all(dir);
}

TEST_CASE("live x86_64: a process in its own mount and pid namespace (perf map via its root, NSpid)",
          "[stack][live]") {
  SKIP_UNLESS(::geteuid() == 0, "needs root");
  SKIP_UNLESS(std::system("command -v unshare >/dev/null 2>&1") == 0, "no unshare");
  namespace fs = std::filesystem;
  // Outside /tmp: the container gets a private tmpfs there.
  char tmpl[] = "/var/tmp/jankbpf-ns-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  std::string bin = dir + "/stack_target";
  fs::copy_file(target_binary(), bin);
  Child c;
  spawn(c, {"-m", "-p", "-f", "--propagation", "private", "sh", "-c",
            "mount -t tmpfs jankbpf-tmp /tmp && exec " + bin + " jit 400"},
        "/usr/bin/unshare");
  pid_t target = child_of(c.pid);
  REQUIRE(target > 0);
  // The target may still be sh for a moment: wait for the exec.
  for (int i = 0; i < 200; ++i) {
    std::error_code ec;
    if (fs::read_symlink("/proc/" + std::to_string(target) + "/exe", ec).string() == bin) break;
    ::usleep(10000);
  }
  auto stacks = sample_run(c, target);
  INFO(dump(stacks.front()));
  // Its /tmp/perf-1.map exists only in its mount namespace, under its pid there.
  CHECK_FALSE(fs::exists("/tmp/perf-1.map"));
  CHECK(count_chain(stacks, {"jit_leaf", "jitBusy", "run_jit", "main"}) >= stacks.size() * 8 / 10);
  fs::remove_all(dir);
}

TEST_CASE("live x86_64: samples in the vDSO unwind through its CFI", "[stack][live]") {
  SKIP_UNLESS(::geteuid() == 0, "needs root");
  Child c;
  spawn(c, {"vdso", "400"});
  auto stacks = sample_run(c, c.pid);
  size_t in_vdso = 0, through = 0;
  std::string example;
  for (const auto& s : stacks) {
    if (s.frames.size() <= s.kernel_frames) continue;
    const Frame& leaf = s.frames[s.kernel_frames];
    if (leaf.module != "[vdso]") continue;
    ++in_vdso;
    INFO("vdso leaf at offset 0x" << std::hex << leaf.module_offset << std::dec << ": " << dump(s));
    // Some kernels' vDSOs keep the clock read in a local function that
    // .dynsym does not name (6.18.44-fc-v782: 0x780-0x810, called from
    // clock_gettime): then the exported function that called it is named.
    const Frame* named = nullptr;
    for (size_t i = s.kernel_frames; i < s.frames.size() && s.frames[i].module == "[vdso]"; ++i)
      if (!s.frames[i].symbol.empty()) {
        named = &s.frames[i];
        break;
      }
    CHECK(named != nullptr);
    CHECK(!leaf.build_id.empty());
    if (count_chain({s}, {"clock_loop", "main"}) == 1 && s.stop == UnwindStop::Complete) ++through;
    if (example.empty()) example = dump(s);
  }
  INFO(example);
  REQUIRE(in_vdso > 0);
  CHECK(through == in_vdso);
}

// Not run by default: `build/jankbpf-unit "[stack-bench]"` (root) prints
// the cost of unwinding + symbolizing one 16 KB sample, cold and warm.
TEST_CASE("bench: resolve cost per 16 KB sample", "[.][stack-bench]") {
  SKIP_UNLESS(::geteuid() == 0, "needs root");
  Child c;
  spawn(c, {"deep", "1000"});
  PerfSampler ps(c.pid, 1'000'000);
  REQUIRE(ps.ok());
  c.go();
  sample_until_output(ps, c, 15000);
  REQUIRE(ps.samples.size() >= 100);
  Resolver r;
  const uint64_t mask = PerfSampler::mask();
  auto t0 = std::chrono::steady_clock::now();
  ResolvedStack first = r.resolve(ps.samples.front().input(mask));
  double cold_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& s : ps.samples) r.resolve(s.input(mask));  // warm every address
  std::vector<double> us;
  for (int round = 0; round < 5; ++round)
    for (const auto& s : ps.samples) {
      auto a = std::chrono::steady_clock::now();
      r.resolve(s.input(mask));
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
    }
  std::sort(us.begin(), us.end());
  auto pct = [&](double q) { return us[static_cast<size_t>(q * static_cast<double>(us.size() - 1))]; };
  std::printf("[stack-bench] %zu samples x5, %zu frames: cold first %.2f ms; warm p50 %.1f us, p99 %.1f us, max %.1f us\n",
              ps.samples.size(), first.frames.size(), cold_ms, pct(0.5), pct(0.99), us.back());
  CHECK(pct(0.5) < 1000.0);
}

// A waker's user stack arrives as return addresses the kernel walked by
// frame pointers; symbolize_user names them in the waker's own process and
// ends the walk where it left executable memory.
extern "C" __attribute__((noinline)) int jankbpf_test_waker_leaf(int x) { return x * 3 + 1; }

TEST_CASE("symbolize_user names walked return addresses and stops at non-code", "[stack][live]") {
  Resolver resolver;
  const auto leaf = reinterpret_cast<uint64_t>(&jankbpf_test_waker_leaf);
  const auto caller = reinterpret_cast<uint64_t>(&target_binary) + 8;  // a "return address" inside it
  auto frames = resolver.symbolize_user(getpid(), host_arch().arch, std::vector<uint64_t>{leaf + 1, caller, 0x1, leaf});
  REQUIRE(frames.size() >= 2);
  CHECK(frames[0].symbol == "jankbpf_test_waker_leaf");
  CHECK(frames[0].symbol_offset == 1);
  CHECK(frames[0].module.find("jankbpf-unit") != std::string::npos);
  bool caller_named = false;
  for (const auto& f : frames) caller_named = caller_named || f.symbol.find("target_binary") != std::string::npos;
  CHECK(caller_named);
  // 0x1 is not code: nothing after it, the later valid address included.
  for (const auto& f : frames) CHECK((f.symbol != "jankbpf_test_waker_leaf" || f.pc == leaf + 1));

  // A process that is gone: addresses come back unnamed, nothing crashes.
  auto gone = resolver.symbolize_user(0x7ffffff0, host_arch().arch, std::vector<uint64_t>{leaf});
  REQUIRE(gone.size() == 1);
  CHECK(gone[0].symbol.empty());
  CHECK(gone[0].pc == leaf);
}

TEST_CASE("a pin re-reads a process's maps only when they are old or it exec'd", "[stack]") {
  // A shell that waits for a line, then becomes /bin/sleep.
  int in[2];
  REQUIRE(::pipe(in) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::close(in[1]);
    ::execl("/bin/sh", "sh", "-c", "read x; exec sleep 30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(in[0]);
  auto maps_of = [&] {
    std::string text;
    read_small_file("/proc/" + std::to_string(pid) + "/maps", text);
    return text;
  };
  for (int i = 0; i < 200 && maps_of().find("/sh") == std::string::npos &&
                  maps_of().find("dash") == std::string::npos;
       ++i)
    ::usleep(10000);
  Resolver r;
  r.prepare(pid, host_arch().arch);
  CHECK(r.stats().maps_reloads == 1);
  r.prepare(pid, host_arch().arch);  // the next long task, nothing changed: no read
  CHECK(r.stats().maps_reloads == 1);
  REQUIRE(::write(in[1], "\n", 1) == 1);
  for (int i = 0; i < 200 && maps_of().find("sleep") == std::string::npos; ++i) ::usleep(10000);
  REQUIRE(maps_of().find("sleep") != std::string::npos);
  r.prepare(pid, host_arch().arch);  // exec'd: read again at once
  CHECK(r.stats().maps_reloads == 2);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ::close(in[1]);
}
