// The metrics endpoint against the attacks of issue 26: names that are not
// UTF-8, names made up to fill the label-set cap, huge label values, a
// render that held the lock emit() needs, idle and trickling clients, and
// accept() at the descriptor limit.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <catch2/catch.hpp>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cause/kinds.h"
#include "metrics/http_server.h"
#include "metrics/listen_addr.h"
#include "metrics/metrics_output.h"
#include "metrics/peer.h"
#include "metrics/prom_number.h"
#include "skip.h"

using namespace jankbpf;

namespace {

TaskRecord jank(const std::string& comm, uint32_t uid, const std::string& exe = "") {
  TaskRecord r;
  r.proc.pid = 4242;
  r.proc.uid = uid;
  r.proc.name = comm;
  r.proc.exe = exe.empty() ? "/usr/bin/" + comm : exe;
  r.duration_ms = 200;
  return r;
}

std::string sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(series + " ", 0) == 0) return line.substr(series.size() + 1);
  return "<missing>";
}

// Strict UTF-8, written apart from the code under test.
bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    uint32_t cp;
    size_t n;
    if (c < 0x80) cp = c, n = 1;
    else if ((c & 0xE0) == 0xC0) cp = c & 0x1F, n = 2;
    else if ((c & 0xF0) == 0xE0) cp = c & 0x0F, n = 3;
    else if ((c & 0xF8) == 0xF0) cp = c & 0x07, n = 4;
    else return false;
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; k++) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
      cp = cp << 6 | (s[i + k] & 0x3F);
    }
    static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

// One GET /metrics; the status line's code, or 0 when no answer came within `ms`.
int scrape(const std::string& bound, int ms, std::string* body = nullptr) {
  std::string err;
  auto where = parse_listen_addr(bound, &err);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  std::string got;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&where->addr), where->len) == 0) {
    const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
    if (send(fd, req, sizeof req - 1, MSG_NOSIGNAL) == sizeof req - 1) {
      char buf[4096];
      ssize_t n;
      while ((n = recv(fd, buf, sizeof buf, 0)) > 0) got.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  if (body) *body = got;
  if (got.rfind("HTTP/1.0 ", 0) != 0) return 0;
  return std::stoi(got.substr(9, 3));
}

int connect_to(const std::string& bound) {
  std::string err;
  auto where = parse_listen_addr(bound, &err);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, reinterpret_cast<const sockaddr*>(&where->addr), where->len) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

std::unique_ptr<MetricsServer> serve_any(MetricsServer::Render render, HttpLimits limits = {}) {
  std::string err;
  auto any = parse_listen_addr("127.0.0.1:0", &err);
  auto s = MetricsServer::start(*any, std::move(render), &err, limits);
  REQUIRE(s);
  REQUIRE(err.empty());
  return s;
}

}  // namespace

TEST_CASE("label values are valid UTF-8 and escaped whatever the name's bytes", "[metrics][hostile]") {
  CHECK(prometheus_label_value("\xff\xfe-jank", 64) == "\xEF\xBF\xBD\xEF\xBF\xBD-jank");
  CHECK(prometheus_label_value("ok-\xc3\xa9", 64) == "ok-\xc3\xa9");  // é stays
  // Overlong '/', a UTF-16 surrogate, past U+10FFFF, a cut sequence, controls.
  for (const char* bad : {"\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "ab\xe2\x82", "a\x01\x7f"}) {
    INFO(bad);
    std::string v = prometheus_label_value(bad, 64);
    CHECK(valid_utf8(v));
    CHECK(v.find("\xEF\xBF\xBD") != std::string::npos);
  }
  CHECK(prometheus_label_value("a\"b\\c\nd", 64) == "a\\\"b\\\\c\\nd");

  MetricsOutput m;
  m.emit(jank("\xff\xfe-jank", 65534, "/tmp/\xff/a.out"));
  std::string t = m.render();
  CHECK(valid_utf8(t));
  CHECK(sample(t, "jankbpf_janks_total{comm=\"\xEF\xBF\xBD\xEF\xBF\xBD-jank\",exe=\"/tmp/\xEF\xBF\xBD/a.out\","
                  "container_id=\"\",cause=\"none\"}") == "1");
}

TEST_CASE("long label values are cut, so a full table renders to a bounded page", "[metrics][hostile]") {
  std::string exe(4096, '"');  // escaping doubles every byte
  exe = "/usr/lib/" + exe + "/bin";
  CHECK(prometheus_label_value(exe, MetricsOutput::kMaxExe, true).size() <= 2 * MetricsOutput::kMaxExe);
  CHECK(prometheus_label_value(exe, MetricsOutput::kMaxExe, true).ends_with("/bin"));
  CHECK(prometheus_label_value(std::string(300, 'x'), 20).starts_with("xxxxxxx"));
  // A cut never splits a code point.
  for (size_t max = 4; max < 12; max++) {
    CHECK(valid_utf8(prometheus_label_value("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", max)));
    CHECK(valid_utf8(prometheus_label_value("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", max, true)));
  }

  MetricsOutput m;
  for (int i = 0; i < 600; i++) {
    TaskRecord r = jank(std::string(15, '"'), static_cast<uint32_t>(i), exe + std::to_string(i));
    r.proc.container_id = std::string(4096, '\\') + std::to_string(i);
    m.emit(r);  // cause="none"
    // And a jank of every cause kind: the janks counter's 12 series a set.
    r.causes_known = true;
    for (size_t k = 1; k < cause::kKinds.size(); k++) {
      r.cause = {CauseSlice{.kind = std::string(cause::kKinds[k]), .ms = 10}};
      m.emit(r);
    }
  }
  std::string t = m.render();
  INFO("scrape of 500 worst-case label sets: " << t.size() << " bytes");
  CHECK(t.find(R"(,cause="kernel_lock"} 1)") != std::string::npos);
  CHECK(t.size() < 8u << 20);
  CHECK(sample(t, "jankbpf_label_sets") == "501");
}

TEST_CASE("made-up names of one uid cannot push another uid's apps into 'other'", "[metrics][hostile]") {
  int64_t now = 1'000'000;
  MetricsOutput m(500, "", 15 * 60 * 1000, [&] { return now; });
  m.emit(jank("redis-server", 100));  // a live app, there before the flood
  for (int i = 0; i < 550; i++) m.emit(jank("fake" + std::to_string(i), 65534));
  m.emit(jank("redis-server", 100));
  m.emit(jank("nginx", 33));   // a new app of another user, after the flood
  m.emit(jank("postgres", 0));
  std::string t = m.render();
  CHECK(sample(t, R"(jankbpf_janks_total{comm="redis-server",exe="/usr/bin/redis-server",container_id="",cause="none"})") == "2");
  CHECK(sample(t, R"(jankbpf_janks_total{comm="nginx",exe="/usr/bin/nginx",container_id="",cause="none"})") == "1");
  CHECK(sample(t, R"(jankbpf_janks_total{comm="postgres",exe="/usr/bin/postgres",container_id="",cause="none"})") == "1");
  CHECK(sample(t, "jankbpf_label_sets") == "501");  // 500 + other
  // The flooding uid's own overflow went to "other" (51 records), and the
  // two slots it gave up folded their counts there: totals are kept.
  CHECK(sample(t, "jankbpf_label_sets_dropped_total") == "51");
  CHECK(sample(t, "jankbpf_label_sets_evicted_total") == "2");
  CHECK(sample(t, R"(jankbpf_janks_total{comm="other",exe="other",container_id="other",cause="none"})") == "53");
  uint64_t total = 0;
  std::istringstream in(t);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("jankbpf_janks_total{", 0) == 0) total += std::stoull(line.substr(line.rfind(' ') + 1));
  CHECK(total == 554);
}

TEST_CASE("names that stopped janking age out; live ones keep their slots", "[metrics][hostile]") {
  int64_t now = 0;
  MetricsOutput m(3, "", 60'000, [&] { return now; });
  m.emit(jank("a", 1000));
  m.emit(jank("b", 1000));
  m.emit(jank("c", 1000));
  m.emit(jank("d", 1000));  // full, nobody idle long enough
  CHECK(sample(m.render(), R"(jankbpf_janks_total{comm="d",exe="/usr/bin/d",container_id="",cause="none"})") == "<missing>");
  now = 50'000;
  m.emit(jank("a", 1000));  // a is live
  now = 61'000;             // b and c idle 61 s, a 11 s
  m.emit(jank("d", 1000));
  m.emit(jank("e", 1000));
  m.emit(jank("f", 1000));  // only a (live), d and e now: none idle
  std::string t = m.render();
  CHECK(sample(t, R"(jankbpf_janks_total{comm="a",exe="/usr/bin/a",container_id="",cause="none"})") == "2");
  CHECK(sample(t, R"(jankbpf_janks_total{comm="d",exe="/usr/bin/d",container_id="",cause="none"})") == "1");
  CHECK(sample(t, R"(jankbpf_janks_total{comm="e",exe="/usr/bin/e",container_id="",cause="none"})") == "1");
  CHECK(sample(t, R"(jankbpf_janks_total{comm="b",exe="/usr/bin/b",container_id="",cause="none"})") == "<missing>");
  CHECK(sample(t, R"(jankbpf_janks_total{comm="other",exe="other",container_id="other",cause="none"})") == "4");  // d, f, b, c
  CHECK(sample(t, "jankbpf_label_sets_evicted_total") == "2");
}

TEST_CASE("render does not hold the lock that emit() needs", "[metrics][hostile]") {
  MetricsOutput m;
  for (int i = 0; i < 500; i++) m.emit(jank("app" + std::to_string(i), 1000));
  // A record arriving while a scrape is rendering (here: from inside the
  // render, at the live-counter read) must not wait for it: with the
  // render under the lock this deadlocks.
  std::atomic<bool> emitted = false;
  m.set_live([&] {
    m.emit(jank("late", 1000));
    emitted = true;
    return MetricsLive{};
  });
  std::atomic<bool> done = false;
  std::thread t([&] {
    m.render();
    done = true;
  });
  for (int i = 0; i < 300 && !done; i++) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(emitted);
  if (!done) t.detach();  // stuck for good: let the other tests run
  REQUIRE(done);
  t.join();
}

// Another user (uid 65534, in a child) holding 160 connections -- half
// silent, half trickling a header byte at a time -- and opening new ones
// as fast as the old are dropped. The child makes system calls only (the
// parent has threads: no allocation after fork).
pid_t squat(const std::string& at, size_t n) {
  std::string err;
  const ListenAddr where = *parse_listen_addr(at, &err);
  std::vector<int> fds(n, -1);
  pid_t pid = fork();
  if (pid != 0) return pid;
  if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(3);
  for (;;) {
    for (size_t i = 0; i < fds.size(); i++) {
      char c;
      if (fds[i] >= 0 && recv(fds[i], &c, 1, MSG_DONTWAIT) == 0) {  // dropped: come back at once
        close(fds[i]);
        fds[i] = -1;
      }
      if (fds[i] < 0) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (connect(fds[i], reinterpret_cast<const sockaddr*>(&where.addr), where.len) != 0) {
          close(fds[i]);
          fds[i] = -1;
        } else if (i % 2) {
          (void)!send(fds[i], "GET /metrics HTTP/1.0\r\nX: ", 26, MSG_NOSIGNAL);
        }
      } else if (i % 2) {
        (void)!send(fds[i], "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      }
    }
    usleep(20000);
  }
}

TEST_CASE("another user's idle, trickling and returning connections do not starve scrapes", "[metrics][hostile]") {
  SKIP_UNLESS(geteuid() == 0, "needs root to run the attacker as uid 65534");
  auto server = serve_any([] { return std::string("x 1\n"); });
  const std::string at = server->bound();
  pid_t attacker = squat(at, 160);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  int answered = 0;
  double worst = 0;
  for (int i = 0; i < 20; i++) {
    const auto t0 = std::chrono::steady_clock::now();
    answered += scrape(at, 1000) == 200;
    worst = std::max(worst, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(attacker, SIGKILL);
  int status;
  waitpid(attacker, &status, 0);
  INFO("longest scrape " << worst << " s; evicted " << server->evicted() << ", refused " << server->refused());
  CHECK(answered == 20);
  CHECK(server->evicted() > 0);
}

TEST_CASE("a local peer is known by its uid, whatever its address", "[metrics][hostile]") {
  SKIP_UNLESS(geteuid() == 0, "needs root to connect as uid 65534");
  std::string err;
  auto any = parse_listen_addr("127.0.0.1:0", &err);
  int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(bind(l, reinterpret_cast<const sockaddr*>(&any->addr), any->len) == 0);
  REQUIRE(listen(l, 4) == 0);
  sockaddr_storage got{};
  socklen_t len = sizeof got;
  getsockname(l, reinterpret_cast<sockaddr*>(&got), &len);
  const std::string at = format_sockaddr(got);
  pid_t child = fork();
  if (child == 0) {
    if (setresuid(65534, 65534, 65534) != 0) _exit(3);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    (void)!connect(fd, reinterpret_cast<const sockaddr*>(&got), len);
    char c;
    (void)!read(fd, &c, 1);  // held until the parent has looked
    _exit(0);
  }
  int conn = accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
  int mine = connect_to(at);
  int conn2 = accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
  PeerIdentity peers;
  REQUIRE(peers.knows_uids());
  CHECK(peers.of(conn) == "uid 65534");
  CHECK(peers.of(conn2) == "uid 0");
  close(conn);
  close(conn2);
  close(mine);
  close(l);
  int status;
  waitpid(child, &status, 0);
}

TEST_CASE("a trickling client gets no more time than a silent one", "[metrics][hostile]") {
  HttpLimits limits;
  limits.read_ms = 600;
  auto server = serve_any([] { return std::string("x 1\n"); }, limits);
  int fd = connect_to(server->bound());
  REQUIRE(fd >= 0);
  const auto t0 = std::chrono::steady_clock::now();
  bool closed = false;
  for (int i = 0; i < 40 && !closed; i++) {
    if (send(fd, "a", 1, MSG_NOSIGNAL) != 1) closed = true;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) > 0) {
      char c;
      closed = recv(fd, &c, 1, MSG_DONTWAIT) == 0 || (p.revents & (POLLHUP | POLLERR));
    }
  }
  const double held = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  close(fd);
  CHECK(closed);
  CHECK(held < 1.5);
}

TEST_CASE("accept() out of descriptors neither spins nor stops the answers", "[metrics][hostile]") {
  auto server = serve_any([] { return std::string("x 1\n"); });
  const std::string at = server->bound();
  REQUIRE(scrape(at, 2000) == 200);
  std::string err;
  auto where = parse_listen_addr(at, &err);
  auto dial = [&](int fd) { return connect(fd, reinterpret_cast<const sockaddr*>(&where->addr), where->len) == 0; };
  // The client sockets first, then every other descriptor the process may
  // have taken: the server's accept() finds EMFILE.
  int silent = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int pending = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(silent >= 0);
  REQUIRE(pending >= 0);
  struct Exhausted {
    rlimit old{};
    std::vector<int> filler;
    Exhausted() {
      getrlimit(RLIMIT_NOFILE, &old);
      int top = open("/dev/null", O_RDONLY | O_CLOEXEC);
      close(top);
      rlimit low = old;
      low.rlim_cur = static_cast<rlim_t>(top + 64);
      setrlimit(RLIMIT_NOFILE, &low);
      for (int fd; (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) filler.push_back(fd);
    }
    ~Exhausted() {
      for (int fd : filler) close(fd);
      setrlimit(RLIMIT_NOFILE, &old);
    }
  };
  double spent = 0;
  ssize_t n = 0;
  char buf[256] = {};
  {
    Exhausted full;
    REQUIRE(full.filler.size() > 0);
    // The silent client takes the spare descriptor; the second then finds
    // accept() at EMFILE with nothing to spend.
    REQUIRE(dial(silent));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    REQUIRE(dial(pending));
    const double cpu0 = cpu_seconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    spent = cpu_seconds() - cpu0;
    close(silent);  // frees descriptors: the pending one is accepted and answered
    const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
    timeval tv{4, 0};
    setsockopt(pending, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    (void)!send(pending, req, sizeof req - 1, MSG_NOSIGNAL);
    n = recv(pending, buf, sizeof buf - 1, 0);
    close(pending);
  }
  INFO("CPU spent in 1.5 s at EMFILE: " << spent << " s");
  CHECK(spent < 0.3);
  CHECK(n > 0);
  CHECK(std::string(buf).rfind("HTTP/1.0 200", 0) == 0);
  CHECK(server->accept_failures() > 0);
  CHECK(scrape(at, 2000) == 200);
}

TEST_CASE("a port another user holds is retried; the server serves once it is free", "[metrics][hostile]") {
  int squatter = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(squatter, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(listen(squatter, 4) == 0);
  socklen_t len = sizeof a;
  getsockname(squatter, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string at = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  std::string err;
  HttpLimits limits;
  limits.bind_retry_ms = 200;
  auto server = MetricsServer::start(*parse_listen_addr(at, &err), [] { return std::string("x 1\n"); }, &err, limits);
  REQUIRE(server);
  CHECK(err.find("--metrics " + at + ": cannot bind") != std::string::npos);
  CHECK(server->bound().empty());
  close(squatter);
  for (int i = 0; i < 50 && server->bound().empty(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(server->bound() == at);
  CHECK(scrape(at, 2000) == 200);
}

TEST_CASE("one page serves every client of the same second", "[metrics][hostile]") {
  std::atomic<int> renders = 0;
  auto server = serve_any([&] {
    renders++;
    return std::string(100000, 'x');
  });
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; i++) REQUIRE(scrape(server->bound(), 2000) == 200);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO("20 scrapes took " << took << " s");
  CHECK(renders <= 1 + static_cast<int>(took));
}

TEST_CASE("sample values: counts in digits, fractions in their shortest exact form", "[metrics]") {
  // CI saw `jankbpf_frames_total{...} 8.7e+02`: valid for a scraper, not
  // for people or for rules that match the line.
  CHECK(prom_number(870) == "870");
  CHECK(prom_number(100) == "100");
  CHECK(prom_number(0) == "0");
  CHECK(prom_number(123456789012.0) == "123456789012");
  CHECK(prom_number(0.15) == "0.15");
  CHECK(prom_number(6.838521373) == "6.838521373");
  CHECK(prom_number(1e300) == "1e+300");
  CHECK(prom_number(1.0 / 0.0) == "+Inf");
  CHECK(prom_number(std::nan("")) == "NaN");
}
