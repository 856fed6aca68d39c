// --marker values: parse never crashes, and what it accepts prints back
// (ProbeSpec::to_string, used in records and messages) as a spec that
// parses to the same probe.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "markers/marker_spec.h"

using namespace jankbpf;

namespace {

void round_trip(const ProbeSpec& p) {
  std::string err;
  auto again = parse_probe(p.to_string(), &err);
  if (!again || again->kind != p.kind || again->binary != p.binary || again->symbol != p.symbol ||
      again->provider != p.provider || again->name != p.name)
    abort();
  if (std::string_view(p.kind_name()) == "?") abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string err;
  auto m = parse_marker(text, &err);
  if (!m) {
    if (err.empty()) abort();  // a refusal must say why
  } else {
    if (m->text != text) abort();
    if (m->preset == MarkerSpec::Preset::None) {
      round_trip(m->begin);
      round_trip(m->end);
    }
  }
  err.clear();
  if (auto p = parse_probe(text, &err)) round_trip(*p);
  else if (err.empty()) abort();
  return 0;
}
