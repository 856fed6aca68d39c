// The JSON-lines sink with arbitrary bytes (invalid UTF-8, control
// characters, NULs) in every string field of a TaskRecord, an ExitRecord
// and a SummaryRecord: each line must be exactly one line of valid JSON
// (checked by parsing it back with nlohmann::json), and a field that was
// valid UTF-8 must come back unchanged.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <nlohmann/json.hpp>

#include "output/output.h"

using namespace jankbpf;

namespace {

// Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF),
// by hand: asking nlohmann means an exception per invalid string, which
// costs more than the rest of an execution.
bool valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    unsigned c = *p++;
    if (c < 0x80) continue;
    int n;
    unsigned cp, min;
    if ((c & 0xe0) == 0xc0) n = 1, cp = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0) n = 2, cp = c & 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0) n = 3, cp = c & 0x07, min = 0x10000;
    else return false;
    if (end - p < n) return false;
    for (int i = 0; i < n; ++i) {
      if ((p[i] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3f);
    }
    p += n;
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
  }
  return true;
}

nlohmann::json parse_line(const std::string& line) {
  if (line.empty() || line.back() != '\n' || line.find('\n') != line.size() - 1) abort();
  try {
    auto j = nlohmann::json::parse(line);
    if (!j.is_object()) abort();
    return j;
  } catch (const nlohmann::json::exception&) {
    abort();
  }
}

void same(const nlohmann::json& j, const std::string& given) {
  if (valid_utf8(given) && (!j.is_string() || j.get<std::string>() != given)) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  auto str = [&] { return in.ConsumeRandomLengthString(48); };

  TaskRecord t;
  t.kind = in.ConsumeBool() ? TaskRecord::Kind::Jank : TaskRecord::Kind::Hang;
  t.proc.name = str();
  t.proc.build_id = str();
  t.proc.exe = str();
  t.proc.cgroup = str();
  t.proc.container_id = str();
  t.thread_name = str();
  t.wait_syscall = str();
  t.boundary = static_cast<Boundary>(in.ConsumeIntegralInRange(0, 2));
  t.runnable_name = str();
  if (in.ConsumeBool()) t.marker = MarkerInfo{1, str(), str(), str(), str(), str()};
  t.external_log = {str(), str()};
  t.log_error = str();
  for (int i = in.ConsumeIntegralInRange(0, 3); i > 0; --i)
    t.suppressed.push_back(static_cast<Suppressed>(in.ConsumeIntegralInRange(0, 3)));
  t.trace_note = str();
  t.heaviest_stack = str();
  t.duration_ms = in.ConsumeFloatingPoint<double>();
  t.delivery_ms = in.ConsumeFloatingPoint<double>();
  t.state.running_ms = in.ConsumeFloatingPoint<double>();
  for (int i = in.ConsumeIntegralInRange(0, 3); i > 0; --i) {
    StackFrame f;
    f.module_index = in.ConsumeIntegral<int>();
    f.offset = in.ConsumeIntegral<uint64_t>();
    f.symbol = str();
    f.file = str();
    f.line = in.ConsumeIntegral<uint32_t>();
    f.kernel = in.ConsumeBool();
    t.stack.push_back(std::move(f));
  }
  t.modules = {{str(), str()}};
  for (int i = in.ConsumeIntegralInRange(0, 2); i > 0; --i) {
    OffCpuInfo o;
    o.state = str();
    o.duration_ms = in.ConsumeFloatingPoint<double>();
    o.kernel_stack = {str()};
    o.has_waker = in.ConsumeBool();
    o.waker.comm = str();
    o.waker.kernel_stack = {str()};
    o.waker.user_stack = {str()};
    t.off_cpu.push_back(std::move(o));
  }
  auto j = parse_line(to_json_line(t));
  same(j["bundle_name"], t.proc.name);
  same(j["exe"], t.proc.exe);
  same(j["thread_name"], t.thread_name);
  same(j["heaviest_stack"], t.heaviest_stack);
  if (!t.stack.empty()) same(j["stack"][0]["symbol"], t.stack[0].symbol);

  ExitRecord e;
  e.name = str();
  e.exit_code = in.ConsumeIntegral<int>();
  same(parse_line(to_json_line(e))["bundle_name"], e.name);

  SummaryRecord s;
  s.watchdog = str();
  s.state_storage = str();
  s.hooks = str();
  s.features_missing = {str(), str()};
  s.bpf = {ProgramCost{str(), in.ConsumeIntegral<uint64_t>(), 0}};
  s.elapsed_s = in.ConsumeFloatingPoint<double>();
  s.cpu_user_s = in.ConsumeFloatingPoint<double>();
  auto js = parse_line(to_json_line(s));
  same(js["watchdog"], s.watchdog);
  same(js["bpf"][0]["name"], s.bpf[0].name);
  return 0;
}
