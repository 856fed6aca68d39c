#include "report/sched_trace.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "report/input_file.h"
#include "trace/capture.h"
#include "trace/spawn.h"
#include "util/clock.h"
#include "util/fd.h"

namespace jankbpf::report {
namespace {

// The value of `key` ("prev_pid=") in `fields`, up to `next_key` (or the
// next space when there is none): comms may hold spaces, numbers never do.
std::string_view field(std::string_view fields, std::string_view key, std::string_view next_key) {
  size_t at = fields.starts_with(key) ? 0 : fields.find(std::string(" ") + std::string(key));
  if (at == std::string_view::npos) return {};
  if (at || !fields.starts_with(key)) at += 1;
  size_t from = at + key.size();
  size_t to = next_key.empty() ? fields.find(' ', from) : fields.find(std::string(" ") + std::string(next_key), from);
  return fields.substr(from, to == std::string_view::npos ? std::string_view::npos : to - from);
}

int64_t num(std::string_view s) { return s.empty() ? 0 : std::strtoll(std::string(s).c_str(), nullptr, 10); }

bool parse_line(std::string_view line, SchedEvent* e, uint64_t from_ns, uint64_t to_ns) {
  size_t ev = line.find(": sched_switch:");
  size_t evlen = 15;
  e->kind = SchedEvent::Kind::Switch;
  if (ev == std::string_view::npos) {
    ev = line.find(": sched_waking:");
    e->kind = SchedEvent::Kind::Waking;
  }
  if (ev == std::string_view::npos) {
    ev = line.find(": sched_wakeup:");
    e->kind = SchedEvent::Kind::Wakeup;
  }
  if (ev == std::string_view::npos) return false;
  // "COMM-PID [CPU] SECS.NANOS" before the event name.
  std::string_view head = line.substr(0, ev);
  size_t ts_at = head.rfind(' ');
  size_t cpu_open = head.rfind('[');
  if (ts_at == std::string_view::npos || cpu_open == std::string_view::npos || cpu_open > ts_at) return false;
  std::string_view ts = head.substr(ts_at + 1);
  size_t dot = ts.find('.');
  if (dot == std::string_view::npos) return false;
  std::string frac(ts.substr(dot + 1));
  if (frac.size() > 9) frac.resize(9);
  while (frac.size() < 9) frac.push_back('0');
  e->ts_ns = static_cast<uint64_t>(num(ts.substr(0, dot))) * 1'000'000'000ULL + std::strtoull(frac.c_str(), nullptr, 10);
  if (e->ts_ns < from_ns || e->ts_ns > to_ns) return false;
  e->cpu = static_cast<uint32_t>(num(head.substr(cpu_open + 1)));
  std::string_view task = head.substr(0, cpu_open);
  while (!task.empty() && task.back() == ' ') task.remove_suffix(1);
  size_t dash = task.rfind('-');
  e->pid = dash == std::string_view::npos ? 0 : static_cast<int32_t>(num(task.substr(dash + 1)));
  std::string_view f = line.substr(ev + evlen);
  while (!f.empty() && f.front() == ' ') f.remove_prefix(1);
  if (e->kind == SchedEvent::Kind::Switch) {
    e->prev_comm = std::string(field(f, "prev_comm=", "prev_pid="));
    e->prev_pid = static_cast<int32_t>(num(field(f, "prev_pid=", "")));
    e->prev_prio = static_cast<int32_t>(num(field(f, "prev_prio=", "")));
    e->prev_state = num(field(f, "prev_state=", ""));
    e->next_comm = std::string(field(f, "next_comm=", "next_pid="));
    e->next_pid = static_cast<int32_t>(num(field(f, "next_pid=", "")));
    e->next_prio = static_cast<int32_t>(num(field(f, "next_prio=", "")));
  } else {
    e->prev_comm = std::string(field(f, "comm=", "pid="));
    e->prev_pid = static_cast<int32_t>(num(field(f, "pid=", "")));
    e->prev_prio = static_cast<int32_t>(num(field(f, "prio=", "")));
    e->target_cpu = static_cast<int32_t>(num(field(f, "target_cpu=", "")));
  }
  return true;
}

}  // namespace

std::vector<SchedEvent> parse_sched_report(std::string_view text, uint64_t from_ns, uint64_t to_ns) {
  std::vector<SchedEvent> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    SchedEvent e;
    if (parse_line(line, &e, from_ns, to_ns)) out.push_back(std::move(e));
  }
  return out;
}

std::vector<SchedEvent> read_sched_events(const std::string& dat, uint64_t from_ns, uint64_t to_ns,
                                          std::string* error, const SchedReadLimits& limits) {
  std::string tc = TraceCapture::find_trace_cmd();
  if (tc.empty()) {
    *error = "trace-cmd is not installed: the trace's CPU tracks are left out";
    return {};
  }
  // The .dat is the input's word, not ours: a regular file of bounded
  // size, handed to trace-cmd as its stdin so what it reads is what was
  // checked (a FIFO there would block it; a device could act on open).
  Opened file = open_input_file(dat, limits.max_file);
  if (!file) {
    *error = "trace " + file.error;
    return {};
  }
  int p[2];
  if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
    *error = std::string("pipe: ") + strerror(errno);
    return {};
  }
  Fd rd(p[0]), wr(p[1]);
  // The writing end blocks (trace-cmd is not written for EAGAIN).
  fcntl(wr.get(), F_SETFL, fcntl(wr.get(), F_GETFL) & ~O_NONBLOCK);
  SpawnSpec spec;
  spec.path = tc;
  spec.argv = {tc, "report", "-t", "-R", "-F", "sched/sched_switch,sched/sched_waking,sched/sched_wakeup", "-i",
               "/proc/self/fd/0"};
  spec.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"};
  spec.output_fd = wr.get();
  spec.input_fd = file.fd.get();
  Child child;
  std::string err;
  if (!child.start(spec, err)) {
    *error = "cannot run trace-cmd: " + err;
    return {};
  }
  wr.reset();
  // Its output is parsed as it comes: only the window's events are kept,
  // within a deadline and a byte bound, whatever the file holds.
  std::vector<SchedEvent> out;
  std::string partial, head;
  uint64_t bytes = 0;
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(limits.timeout_ms) * 1'000'000;
  std::string why_stopped;
  char buf[65536];
  auto take_lines = [&](bool all) {
    size_t pos = 0;
    for (size_t nl; (nl = partial.find('\n', pos)) != std::string::npos; pos = nl + 1) {
      SchedEvent e;
      if (out.size() < limits.max_events &&
          parse_line(std::string_view(partial).substr(pos, nl - pos), &e, from_ns, to_ns))
        out.push_back(std::move(e));
    }
    partial.erase(0, pos);
    if (all && !partial.empty()) {
      SchedEvent e;
      if (out.size() < limits.max_events && parse_line(partial, &e, from_ns, to_ns)) out.push_back(std::move(e));
      partial.clear();
    }
  };
  for (;;) {
    const uint64_t now = monotonic_ns();
    if (now >= deadline) {
      why_stopped = "took over " + std::to_string(limits.timeout_ms / 1000) + " s";
      break;
    }
    pollfd pfd{rd.get(), POLLIN, 0};
    int r = poll(&pfd, 1, static_cast<int>(std::min<uint64_t>((deadline - now) / 1'000'000 + 1, 1000)));
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    ssize_t n = read(rd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      break;
    }
    if (n == 0) break;  // trace-cmd is done (or closed its output)
    bytes += static_cast<uint64_t>(n);
    if (head.size() < 300) head.append(buf, std::min<size_t>(static_cast<size_t>(n), 300 - head.size()));
    partial.append(buf, static_cast<size_t>(n));
    if (partial.size() > (1u << 20) && partial.find('\n') == std::string::npos) partial.clear();  // no line that long
    take_lines(false);
    if (bytes > limits.max_output) {
      why_stopped = "printed over " + std::to_string(limits.max_output >> 20) + " MiB";
      break;
    }
  }
  take_lines(true);
  int status = 0;
  if (!why_stopped.empty() || !child.wait(5000, status)) {
    child.kill(status);
    *error = "trace-cmd report on '" + dat + "' " + (why_stopped.empty() ? "did not exit" : why_stopped) +
             ": killed; its CPU tracks are left out";
    return {};
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *error = "trace-cmd report on '" + dat + "' failed: " + head;
    return {};
  }
  return out;
}

}  // namespace jankbpf::report
