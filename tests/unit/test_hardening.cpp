// The low-severity holes of issue 10: descriptors leaking into trace-cmd,
// control characters from process-chosen names reaching stderr and stack
// logs, invalid UTF-8 in JSON, and --output through a symlinked directory.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "output/output.h"
#include "stack/tree.h"
#include "trace/spawn.h"
#include "util/log.h"
#include "skip.h"

using namespace jankbpf;
namespace fs = std::filesystem;

TEST_CASE("a spawned tool inherits only 0-2, whatever was opened without O_CLOEXEC", "[hardening]") {
  SKIP_UNLESS(access("/usr/bin/test", X_OK) == 0, "no /usr/bin/test");
  // As libdwfl keeps module descriptors: no close-on-exec.
  int leaked = ::open("/etc/hostname", O_RDONLY);
  REQUIRE(leaked >= 0);
  REQUIRE(::dup2(leaked, 57) == 57);
  auto run = [](const std::string& fd_path) {
    SpawnSpec spec;
    spec.path = "/usr/bin/test";
    spec.argv = {"test", "-e", fd_path};
    Child c;
    std::string err;
    REQUIRE(c.start(spec, err));
    int status = -1;
    REQUIRE(c.wait(5000, status));
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  CHECK(run("/proc/self/fd/57") == 1);  // not inherited
  CHECK(run("/proc/self/fd/" + std::to_string(leaked)) == 1);
  CHECK(run("/proc/self/fd/2") == 0);   // what it needs is there
  ::close(57);
  ::close(leaked);
}

TEST_CASE("control characters from names never reach stderr or a stack log raw", "[hardening]") {
  CHECK(log::escape_control("ok name") == "ok name");
  CHECK(log::escape_control("a\nb\tc\x1b[31m\x7f") == "a\\nb\\tc\\x1b[31m\\x7f");
  CHECK(log::escape_control("caf\xc3\xa9") == "caf\xc3\xa9");  // UTF-8 untouched

  stack::ResolvedStack s;
  stack::Frame f;
  f.pc = 0x1000;
  f.module = "/tmp/evil\nlib.so";
  f.symbol = "fn\n1 #00 pc 00000000 forged(main+0)";
  f.module_offset = 0x10;
  s.frames.push_back(f);
  stack::StackTree t;
  t.add(s);
  std::string text = t.render();
  INFO(text);
  CHECK(std::count(text.begin(), text.end(), '\n') == 1);  // one frame, one line
  CHECK(text.find("evil\\nlib.so(fn\\n1 #00") != std::string::npos);
}

TEST_CASE("records stay valid JSON with invalid UTF-8 and control characters", "[hardening][output]") {
  TaskRecord r;
  r.proc.name = "bad\xff\xfe utf8";
  r.thread_name = "t\n\x01\x1b";
  r.proc.exe = std::string("/x\0y", 4);
  r.heaviest_stack = "\xc3\x28";
  StackFrame sf;
  sf.symbol = "sym\xe2\x82";
  sf.file = "f\n.c";
  r.stack.push_back(sf);
  std::string line = to_json_line(r);
  REQUIRE(line.back() == '\n');
  CHECK(line.find('\n') == line.size() - 1);
  auto j = nlohmann::json::parse(line);  // throws on invalid JSON
  CHECK(j["thread_name"] == "t\n\x01\x1b");
  CHECK(j["stack"][0]["file"] == "f\n.c");  // no line known: the path alone
}

TEST_CASE("--output refuses a symlink anywhere on its path", "[hardening][output]") {
  char tmpl[] = "/tmp/jankbpf-output-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  fs::create_directory(dir + "/real");
  fs::create_directory_symlink(dir + "/real", dir + "/link");
  std::string error;
  CHECK_FALSE(JsonLinesOutput::open(dir + "/link/out.jsonl", &error));
  CHECK(error == "--output: '" + dir + "/link/out.jsonl': \"link\" is a symlink (jankbpf does not write "
                 "through symlinks; give the real path)");
  CHECK_FALSE(fs::exists(dir + "/real/out.jsonl"));
  CHECK_FALSE(JsonLinesOutput::open(dir + "/real/../real/out.jsonl", &error));
  CHECK(error.find("\"..\" is not allowed") != std::string::npos);
  CHECK(JsonLinesOutput::open(dir + "/real/out.jsonl", &error));
  CHECK(fs::exists(dir + "/real/out.jsonl"));
  // Relative paths walk from the working directory the same way.
  std::string cwd = fs::current_path();
  fs::current_path(dir);
  CHECK_FALSE(JsonLinesOutput::open("link/rel.jsonl", &error));
  CHECK(JsonLinesOutput::open("real/rel.jsonl", &error));
  fs::current_path(cwd);
  CHECK(fs::exists(dir + "/real/rel.jsonl"));
  fs::remove_all(dir);
}
