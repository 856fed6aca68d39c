// Unit tests for running as a service: --metrics addresses, the metrics
// sink and its HTTP answers, and --output reopened for log rotation.
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/options.h"
#include "config/jank_config.h"
#include "metrics/http_server.h"
#include "metrics/listen_addr.h"
#include "metrics/metrics_output.h"
#include "output/output.h"

using namespace jankbpf;

namespace {

ParseOutcome parse(std::vector<std::string> args) {
  args.insert(args.begin(), "jankbpf");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parse_options(static_cast<int>(argv.size()), argv.data());
}

TaskRecord jank(const std::string& comm, double ms, const std::string& container = "") {
  TaskRecord r;
  r.proc.pid = 4242;
  r.proc.name = comm;
  r.proc.exe = "/usr/bin/" + comm;
  r.proc.container_id = container;
  r.duration_ms = ms;
  return r;
}

// The value of one sample line "NAME{LABELS} VALUE" (exact name and labels).
std::string sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(series + " ", 0) == 0) return line.substr(series.size() + 1);
  return "<missing>";
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("--metrics takes numeric ADDR:PORT forms", "[metrics]") {
  std::string err;
  auto a = parse_listen_addr("9477", &err);
  REQUIRE(a);
  CHECK(format_sockaddr(a->addr) == "127.0.0.1:9477");
  CHECK(format_sockaddr(parse_listen_addr("0.0.0.0:80", &err)->addr) == "0.0.0.0:80");
  CHECK(format_sockaddr(parse_listen_addr("localhost:0", &err)->addr) == "127.0.0.1:0");
  CHECK(format_sockaddr(parse_listen_addr("[::1]:9477", &err)->addr) == "[::1]:9477");
  for (const char* bad : {"", "abc", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "::1:9477",
                          "[::1]9477", "example.com:9477", "1.2.3:80", "127.0.0.1:80x"}) {
    INFO(bad);
    CHECK_FALSE(parse_listen_addr(bad, &err));
    CHECK(err.find("allowed: PORT") != std::string::npos);
  }
}

TEST_CASE("a bad --metrics value is a usage error naming the forms", "[metrics][cli]") {
  auto out = parse({"--metrics", "localhost:http"});
  CHECK(out.exit_code == kExitUsage);
  CHECK(out.message.find("--metrics: \"localhost:http\"") != std::string::npos);
  CHECK(out.message.find("[IPV6]:PORT") != std::string::npos);
  auto good = parse({"--metrics", "127.0.0.1:9477"});
  REQUIRE(good.options);
  CHECK(good.options->metrics->text == "127.0.0.1:9477");
}

TEST_CASE("metrics count janks, hangs and blocked time per comm, exe, container", "[metrics]") {
  MetricsOutput m(10, "test");
  m.emit(jank("redis-server", 300));
  m.emit(jank("redis-server", 200));
  TaskRecord hang = jank("redis-server", 3000);
  hang.kind = TaskRecord::Kind::Hang;
  m.emit(hang);
  m.emit(jank("node", 1500, "abc123"));
  m.set_live([] { return MetricsLive{7, 99, 3}; });
  std::string t = m.render();
  const std::string redis = R"({comm="redis-server",exe="/usr/bin/redis-server",container_id=""})";
  const std::string node = R"({comm="node",exe="/usr/bin/node",container_id="abc123"})";
  CHECK(sample(t, "jankbpf_janks_total" + redis.substr(0, redis.size() - 1) + ",cause=\"none\"}") == "2");
  CHECK(sample(t, "jankbpf_hangs_total" + redis) == "1");
  CHECK(std::stod(sample(t, "jankbpf_main_thread_blocked_seconds_total" + redis)) == Approx(0.5));
  CHECK(sample(t, "jankbpf_janks_total" + node.substr(0, node.size() - 1) + ",cause=\"none\"}") == "1");
  // Buckets are cumulative; 0.2 s and 0.3 s fall in le=0.25 and le=0.45.
  const std::string rl = redis.substr(0, redis.size() - 1);
  CHECK(sample(t, "jankbpf_jank_duration_seconds_bucket" + rl + ",le=\"0.15\"}") == "0");
  CHECK(sample(t, "jankbpf_jank_duration_seconds_bucket" + rl + ",le=\"0.25\"}") == "1");
  CHECK(sample(t, "jankbpf_jank_duration_seconds_bucket" + rl + ",le=\"0.45\"}") == "2");
  CHECK(sample(t, "jankbpf_jank_duration_seconds_bucket" + rl + ",le=\"+Inf\"}") == "2");
  CHECK(sample(t, "jankbpf_jank_duration_seconds_count" + redis) == "2");
  CHECK(sample(t, "jankbpf_lost_events_total") == "7");
  CHECK(sample(t, "jankbpf_tasks_checked_total") == "99");
  CHECK(sample(t, "jankbpf_records_dropped_total") == "3");
  CHECK(t.find("pid=") == std::string::npos);
  CHECK(t.find("# TYPE jankbpf_jank_duration_seconds histogram") != std::string::npos);
  CHECK(t.find("jankbpf_cpu_seconds_total{mode=\"user\"}") != std::string::npos);
  CHECK(std::stol(sample(t, "jankbpf_resident_memory_bytes")) > 0);
}

TEST_CASE("the janks counter's cause label is the kind of each jank's largest cause", "[metrics][causes]") {
  auto with_causes = [](std::vector<std::pair<std::string, double>> slices) {
    TaskRecord r = jank("app", 400);
    r.causes_known = true;
    for (auto& [kind, ms] : slices) r.cause.push_back(CauseSlice{.kind = kind, .ms = ms});
    return r;
  };
  MetricsOutput m(10);
  m.emit(with_causes({{"lock", 300}, {"runnable", 50}}));
  m.emit(with_causes({{"lock", 120}, {"peer", 100}, {"peer", 90}}));  // peer: 190 ms over two slices
  m.emit(with_causes({{"sleep", 200}}));
  m.emit(with_causes({}));                 // ran throughout: no cause
  m.emit(jank("app", 400));                // causes off
  m.emit(with_causes({{"made-up", 900}})); // not a kind: never a label value
  std::string t = m.render();
  const std::string l = R"(jankbpf_janks_total{comm="app",exe="/usr/bin/app",container_id="",cause=)";
  CHECK(sample(t, l + R"("lock"})") == "1");
  CHECK(sample(t, l + R"("peer"})") == "1");
  CHECK(sample(t, l + R"("sleep"})") == "1");
  CHECK(sample(t, l + R"("none"})") == "3");
  CHECK(sample(t, l + R"("runnable"})") == "<missing>");
  CHECK(t.find("made-up") == std::string::npos);
  CHECK(sample(t, R"(jankbpf_jank_duration_seconds_count{comm="app",exe="/usr/bin/app",container_id=""})") == "6");
}

TEST_CASE("label sets past the cap go to one 'other' series and are counted", "[metrics]") {
  MetricsOutput m(3);
  for (int i = 0; i < 10; i++) m.emit(jank("app" + std::to_string(i), 200));
  m.emit(jank("app0", 200));  // a set that has its own series keeps it
  std::string t = m.render();
  CHECK(sample(t, "jankbpf_label_sets") == "4");  // 3 + other
  CHECK(sample(t, "jankbpf_label_sets_dropped_total") == "7");
  CHECK(sample(t, R"(jankbpf_janks_total{comm="other",exe="other",container_id="other",cause="none"})") == "7");
  CHECK(sample(t, R"(jankbpf_janks_total{comm="app0",exe="/usr/bin/app0",container_id="",cause="none"})") == "2");
}

TEST_CASE("label values are escaped; the summary freezes live counters", "[metrics]") {
  MetricsOutput m;
  m.emit(jank("we\"ird\\na\nme", 200));
  m.set_live([] { return MetricsLive{1, 2}; });
  SummaryRecord s;
  s.kernel.ringbuf_drops = 5;
  s.kernel.offcpu_ring_full = 9;  // the captures ring's losses are not this counter's
  s.kernel.tasks = 6;
  s.records_dropped = 4;
  m.emit(s);
  std::string t = m.render();
  CHECK(t.find(R"(comm="we\"ird\\na\nme")") != std::string::npos);
  CHECK(sample(t, "jankbpf_lost_events_total") == "5");
  CHECK(sample(t, "jankbpf_records_dropped_total") == "4");
}

TEST_CASE("the HTTP answer: /metrics, HEAD, 404, 405, 400", "[metrics]") {
  auto render = [] { return std::string("x 1\n"); };
  std::string ok = http_response("GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n", render);
  CHECK(ok.rfind("HTTP/1.0 200 OK\r\n", 0) == 0);
  CHECK(ok.find("Content-Type: text/plain; version=0.0.4") != std::string::npos);
  CHECK(ok.find("Content-Length: 4\r\n") != std::string::npos);
  CHECK(ok.substr(ok.size() - 4) == "x 1\n");
  std::string head = http_response("HEAD /metrics?x=1 HTTP/1.0\r\n\r\n", render);
  CHECK(head.rfind("HTTP/1.0 200", 0) == 0);
  CHECK(head.substr(head.size() - 4) == "\r\n\r\n");
  CHECK(http_response("GET /etc/passwd HTTP/1.0\r\n\r\n", render).rfind("HTTP/1.0 404", 0) == 0);
  CHECK(http_response("POST /metrics HTTP/1.0\r\n\r\n", render).rfind("HTTP/1.0 405", 0) == 0);
  CHECK(http_response("garbage\r\n\r\n", render).rfind("HTTP/1.0 400", 0) == 0);
}

TEST_CASE("a busy port is an error naming the address, and the server waits for it", "[metrics]") {
  std::string err;
  auto any = parse_listen_addr("127.0.0.1:0", &err);
  auto first = MetricsServer::start(*any, [] { return std::string(); }, &err);
  REQUIRE(first);
  CHECK(err.empty());
  auto again = parse_listen_addr(first->bound(), &err);
  REQUIRE(again);
  auto second = MetricsServer::start(*again, [] { return std::string(); }, &err);
  REQUIRE(second);
  CHECK(err.find("--metrics " + first->bound() + ": cannot bind") != std::string::npos);
  CHECK(second->bound().empty());
}

TEST_CASE("--output reopens after a rename; stdout does not", "[output][rotation]") {
  char dir[] = "/tmp/jankbpf-unit-XXXXXX";
  REQUIRE(mkdtemp(dir));
  const std::string path = std::string(dir) + "/janks.jsonl", old = path + ".1";
  std::string err;
  auto out = JsonLinesOutput::open(path, &err);
  REQUIRE(out);
  ExitRecord e;
  e.pid = 1;
  out->emit(e);
  REQUIRE(rename(path.c_str(), old.c_str()) == 0);
  e.pid = 2;
  out->emit(e);  // still to the renamed file, as before the SIGHUP
  REQUIRE(out->reopen(&err));
  e.pid = 3;
  out->emit(e);
  CHECK(read_file(old).find("\"pid\":1") != std::string::npos);
  CHECK(read_file(old).find("\"pid\":2") != std::string::npos);
  CHECK(read_file(path).find("\"pid\":3") != std::string::npos);
  CHECK(read_file(path).find("\"pid\":2") == std::string::npos);
  struct stat st{};
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);
  // A symlink planted where the file was is refused; the old file is kept.
  unlink(path.c_str());
  REQUIRE(symlink("/etc/passwd", path.c_str()) == 0);
  CHECK_FALSE(out->reopen(&err));
  CHECK(err.find("symlink") != std::string::npos);
  unlink(path.c_str());
  unlink(old.c_str());
  rmdir(dir);

  auto std_out = JsonLinesOutput::open("", &err);
  CHECK_FALSE(std_out->reopen(&err));
}

TEST_CASE("the packaged /etc/jankbpf/config.json is the seed's defaults", "[package]") {
  // Run from the repository root, as `make unit` does.
  ConfigBuilder cb;
  REQUIRE_NOTHROW(cb.load_file("debian/config.json"));
  JankConfig got = cb.build(), want;
  CHECK(got.log_type == want.log_type);
  CHECK(got.sample_interval_ms == want.sample_interval_ms);
  CHECK(got.ignore_startup_time_s == want.ignore_startup_time_s);
  CHECK(got.sample_count == want.sample_count);
  CHECK(got.report_times_per_app == want.report_times_per_app);
}
