// The MAIN_THREAD_JANK configuration: every key's bounds (below, at, above),
// the seed's own examples, file errors, precedence, and the exact messages
// the CLI prints before exiting 2.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "config/jank_config.h"

using jankbpf::ConfigBuilder;
using jankbpf::ConfigError;
using jankbpf::JankConfig;

namespace {

// The message a flag-applied value produces, or "" when it is accepted.
std::string flag_error(const std::string& key, const std::string& value) {
  ConfigBuilder b;
  try {
    b.apply(key, value);
    b.build();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& text) {
    char tmpl[] = "/tmp/jankbpf-config-XXXXXX";
    int fd = mkstemp(tmpl);
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    close(fd);
    path = tmpl;
  }
  ~TempFile() { unlink(path.c_str()); }
};

std::string file_error(const std::string& text, std::string* path_out = nullptr) {
  TempFile f(text);
  if (path_out) *path_out = f.path;
  ConfigBuilder b;
  try {
    b.load_file(f.path);
    b.build();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("defaults match the seed", "[config]") {
  JankConfig c = ConfigBuilder().build();
  CHECK(c.log_type == 0);
  CHECK(c.sample_interval_ms == 150);
  CHECK(c.ignore_startup_time_s == 10);
  CHECK(c.sample_count == 10);
  CHECK(c.report_times_per_app == 1);
  CHECK(c.stacks_enabled());
  CHECK(c.trace_enabled());
  CHECK(JankConfig::max_sample_count(150) == 12);
  CHECK(JankConfig::max_sample_count(100) == 21);
  CHECK(JankConfig::max_sample_count(50) == 46);
  CHECK(JankConfig::max_sample_count(500) == 1);
}

TEST_CASE("log_type bounds", "[config]") {
  CHECK(flag_error("log_type", "-1") ==
        "config: log_type \"-1\" out of range: allowed 0..2 (0 stacks and trace, 1 stacks only, 2 trace only)");
  CHECK(flag_error("log_type", "0") == "");
  CHECK(flag_error("log_type", "2") == "");
  CHECK(flag_error("log_type", "3") ==
        "config: log_type \"3\" out of range: allowed 0..2 (0 stacks and trace, 1 stacks only, 2 trace only)");
  ConfigBuilder b;
  b.apply("log_type", "1");
  CHECK(!b.build().trace_enabled());
  b.apply("log_type", "2");
  CHECK(!b.build().stacks_enabled());
}

TEST_CASE("sample_interval bounds", "[config]") {
  CHECK(flag_error("sample_interval", "49") ==
        "config: sample_interval \"49\" out of range: allowed 50..500 (ms)");
  CHECK(flag_error("sample_interval", "30") ==
        "config: sample_interval \"30\" out of range: allowed 50..500 (ms)");
  CHECK(flag_error("sample_interval", "50") == "");
  CHECK(flag_error("sample_interval", "500") == "");
  CHECK(flag_error("sample_interval", "501") ==
        "config: sample_interval \"501\" out of range: allowed 50..500 (ms)");
}

TEST_CASE("ignore_startup_time bounds", "[config]") {
  CHECK(flag_error("ignore_startup_time", "2") ==
        "config: ignore_startup_time \"2\" out of range: allowed 3..86400 (s)");
  CHECK(flag_error("ignore_startup_time", "3") == "");
  CHECK(flag_error("ignore_startup_time", "86400") == "");
  CHECK(flag_error("ignore_startup_time", "86401") ==
        "config: ignore_startup_time \"86401\" out of range: allowed 3..86400 (s)");
  ConfigBuilder b;
  b.apply("ignore_startup_time", "11");
  CHECK(b.build().ignore_startup_ms() == 11000);
}

TEST_CASE("report_times_per_app bounds", "[config]") {
  const std::string what = "(reports per process per day, per hour with --dev)";
  CHECK(flag_error("report_times_per_app", "0") ==
        "config: report_times_per_app \"0\" out of range: allowed 1..3 " + what);
  CHECK(flag_error("report_times_per_app", "1") == "");
  CHECK(flag_error("report_times_per_app", "3") == "");
  CHECK(flag_error("report_times_per_app", "4") ==
        "config: report_times_per_app \"4\" out of range: allowed 1..3 " + what);
}

TEST_CASE("sample_count's bound follows sample_interval", "[config]") {
  CHECK(flag_error("sample_count", "0") ==
        "config: sample_count \"0\" out of range: allowed 1..12 (samples: 2500/sample_interval - 4, "
        "with sample_interval 150 ms)");
  CHECK(flag_error("sample_count", "1") == "");
  CHECK(flag_error("sample_count", "12") == "");
  CHECK(flag_error("sample_count", "13") ==
        "config: sample_count \"13\" out of range: allowed 1..12 (samples: 2500/sample_interval - 4, "
        "with sample_interval 150 ms)");

  // The seed's log_type 1 example: interval 100 allows exactly 21.
  for (auto [interval, max] : {std::pair{50, 46}, {100, 21}, {178, 10}, {200, 8}, {500, 1}}) {
    ConfigBuilder ok;
    ok.apply("sample_interval", std::to_string(interval));
    ok.apply("sample_count", std::to_string(max));
    CHECK(ok.build().sample_count == max);
    ConfigBuilder over;
    over.apply("sample_count", std::to_string(max + 1));  // order must not matter
    over.apply("sample_interval", std::to_string(interval));
    CHECK_THROWS_WITH(over.build(), "config: sample_count \"" + std::to_string(max + 1) +
                                        "\" out of range: allowed 1.." + std::to_string(max) +
                                        " (samples: 2500/sample_interval - 4, with sample_interval " +
                                        std::to_string(interval) + " ms)");
  }
}

TEST_CASE("an unset sample_count is lowered to fit a long interval", "[config]") {
  ConfigBuilder b;
  b.apply("sample_interval", "500");
  CHECK(b.build().sample_count == 1);
  b.apply("sample_interval", "178");
  CHECK(b.build().sample_count == 10);
}

TEST_CASE("values that are not whole numbers", "[config]") {
  for (const char* bad : {"", " 100", "100 ", "1e2", "0x64", "100ms", "10.0", "+", "abc"}) {
    CAPTURE(bad);
    CHECK(flag_error("sample_interval", bad) ==
          std::string("config: sample_interval \"") + bad +
              "\" is not a whole number: allowed 50..500 (ms)");
  }
  CHECK(flag_error("sample_count", "x") ==
        "config: sample_count \"x\" is not a whole number: allowed 1..2500/sample_interval - 4 (samples)");
  // Too big for any integer type: still out of range, with the text as given.
  CHECK(flag_error("sample_interval", "99999999999999999999999") ==
        "config: sample_interval \"99999999999999999999999\" out of range: allowed 50..500 (ms)");
  CHECK(flag_error("sample_count", "99999999999999999999999").find("out of range: allowed 1..12") !=
        std::string::npos);
  CHECK(flag_error("sample_interval", "0100") == "");  // leading zeros are still 100
}

TEST_CASE("an unknown key given as a flag", "[config]") {
  CHECK(flag_error("sample-interval", "100") ==
        "config: unknown key \"sample-interval\": allowed keys log_type, sample_interval, "
        "ignore_startup_time, sample_count, report_times_per_app");
}

TEST_CASE("the seed's setEventConfig examples load as files", "[config]") {
  TempFile f(R"({"log_type":"1","sample_interval":"100","ignore_startup_time":"11","sample_count":"21","report_times_per_app":"3"})");
  ConfigBuilder b;
  b.load_file(f.path);
  JankConfig c = b.build();
  CHECK(c.log_type == 1);
  CHECK(c.sample_interval_ms == 100);
  CHECK(c.ignore_startup_time_s == 11);
  CHECK(c.sample_count == 21);
  CHECK(c.report_times_per_app == 3);

  TempFile two(R"({"log_type": "2"})");
  ConfigBuilder b2;
  b2.load_file(two.path);
  CHECK(b2.build().log_type == 2);

  TempFile empty("{}");
  ConfigBuilder b3;
  b3.load_file(empty.path);
  CHECK(b3.build().log_type == 0);
}

TEST_CASE("flags win over the file, whatever the order", "[config]") {
  TempFile f(R"({"log_type":"1","sample_interval":"100","sample_count":"21"})");
  ConfigBuilder b;
  b.apply("sample_interval", "200");  // flag parsed before --config
  b.load_file(f.path);
  b.apply("log_type", "0");
  // The file's sample_count 21 no longer fits the flag's interval 200 (max 8):
  // the message names the file the 21 came from.
  CHECK_THROWS_WITH(b.build(), "config: " + f.path +
                                   ": sample_count \"21\" out of range: allowed 1..8 (samples: "
                                   "2500/sample_interval - 4, with sample_interval 200 ms)");
  b.apply("sample_count", "8");
  JankConfig c = b.build();
  CHECK(c.log_type == 0);
  CHECK(c.sample_interval_ms == 200);
  CHECK(c.sample_count == 8);
}

TEST_CASE("a bad file leaves earlier layers untouched", "[config]") {
  TempFile good(R"({"sample_interval":"100"})");
  TempFile bad(R"({"sample_interval":"300","log_type":"7"})");
  ConfigBuilder b;
  b.load_file(good.path);
  CHECK_THROWS_AS(b.load_file(bad.path), ConfigError);
  CHECK(b.build().sample_interval_ms == 100);
}

TEST_CASE("bad config files", "[config]") {
  std::string path;
  SECTION("a value out of range") {
    std::string msg = file_error(R"({"log_type":"1","sample_interval":"30"})", &path);
    CHECK(msg == "config: " + path + ": sample_interval \"30\" out of range: allowed 50..500 (ms)");
  }
  SECTION("a value that is not a number") {
    std::string msg = file_error(R"({"report_times_per_app":"many"})", &path);
    CHECK(msg == "config: " + path +
                     ": report_times_per_app \"many\" is not a whole number: allowed 1..3 (reports per "
                     "process per day, per hour with --dev)");
  }
  SECTION("an unknown key") {
    std::string msg = file_error(R"({"log_type":"0","sample_intervall":"100"})", &path);
    CHECK(msg == "config: " + path +
                     ": unknown key \"sample_intervall\": allowed keys log_type, sample_interval, "
                     "ignore_startup_time, sample_count, report_times_per_app");
  }
  SECTION("a number where setEventConfig takes a string") {
    std::string msg = file_error(R"({"sample_interval":100})", &path);
    CHECK(msg == "config: " + path +
                     ": sample_interval 100 is a JSON number, not a string as setEventConfig takes it: "
                     "allowed \"50\"..\"500\" (ms)");
  }
  SECTION("other wrong types") {
    std::string msg = file_error(R"({"log_type":true})", &path);
    CHECK(msg == "config: " + path +
                     ": log_type true is a JSON boolean, not a string as setEventConfig takes it: "
                     "allowed \"0\"..\"2\" (0 stacks and trace, 1 stacks only, 2 trace only)");
    msg = file_error(R"({"sample_count":null})", &path);
    CHECK(msg == "config: " + path +
                     ": sample_count null is a JSON null, not a string as setEventConfig takes it: "
                     "allowed \"1\"..\"2500/sample_interval - 4\" (samples)");
    msg = file_error(R"({"sample_count":["3"]})", &path);
    CHECK(msg.find("is a JSON array, not a string") != std::string::npos);
  }
  SECTION("a top level that is not an object") {
    std::string msg = file_error(R"(["log_type","1"])", &path);
    CHECK(msg == "config: " + path +
                     ": expected a JSON object of string values such as {\"log_type\": \"0\"}, got array");
    msg = file_error(R"("1")", &path);
    CHECK(msg.find("got string") != std::string::npos);
  }
  SECTION("not JSON at all") {
    std::string msg = file_error("log_type=1\n", &path);
    CHECK(msg.rfind("config: " + path + ": not valid JSON: [json.exception.parse_error.101]", 0) == 0);
    msg = file_error(R"({"log_type":"1",})", &path);
    CHECK(msg.rfind("config: " + path + ": not valid JSON: ", 0) == 0);
    msg = file_error("", &path);
    CHECK(msg.rfind("config: " + path + ": not valid JSON: ", 0) == 0);
  }
  SECTION("a key given twice") {
    std::string msg = file_error(R"({"sample_interval":"100","sample_interval":"200"})", &path);
    CHECK(msg == "config: " + path + ": key \"sample_interval\" given twice");
  }
  SECTION("an oversized file") {
    std::string big = "{\"log_type\":\"0\"" + std::string(70000, ' ') + "}";
    std::string msg = file_error(big, &path);
    CHECK(msg == "config: " + path + ": larger than 65536 bytes, not a MAIN_THREAD_JANK config");
  }
}

TEST_CASE("unreadable config files", "[config]") {
  ConfigBuilder b;
  CHECK_THROWS_WITH(b.load_file("/nonexistent/jankbpf.json"),
                    "config: cannot read /nonexistent/jankbpf.json: No such file or directory");
  CHECK_THROWS_WITH(b.load_file("/tmp"), "config: cannot read /tmp: Is a directory");
}
