#include "markers/marker_spec.h"

#include <vector>

namespace jankbpf {
namespace {

constexpr std::string_view kReturn = "%return";

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    auto at = s.find(sep);
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

bool valid_identifier(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '$' || c == '@';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

const char* ProbeSpec::kind_name() const {
  switch (kind) {
    case Kind::Uprobe: return "uprobe";
    case Kind::Uretprobe: return "uretprobe";
    case Kind::Usdt: return "usdt";
  }
  return "?";
}

std::string ProbeSpec::probe() const {
  switch (kind) {
    case Kind::Uprobe: return symbol;
    case Kind::Uretprobe: return symbol + std::string(kReturn);
    case Kind::Usdt: return provider + ":" + name;
  }
  return "";
}

std::optional<ProbeSpec> parse_probe(std::string_view text, std::string* error) {
  ProbeSpec p;
  auto parts = split(text, ':');
  if (parts.size() < 2 || parts.size() > 3) {
    *error = "'" + std::string(text) +
             "' is not BINARY:SYMBOL, BINARY:SYMBOL%return or BINARY:PROVIDER:NAME";
    return std::nullopt;
  }
  p.binary = std::string(parts[0]);
  if (p.binary.empty()) {
    *error = "'" + std::string(text) + "' names no binary";
    return std::nullopt;
  }
  if (parts.size() == 2) {
    std::string_view sym = parts[1];
    p.kind = ProbeSpec::Kind::Uprobe;
    if (sym.ends_with(kReturn)) {
      sym.remove_suffix(kReturn.size());
      p.kind = ProbeSpec::Kind::Uretprobe;
    }
    if (!valid_identifier(sym)) {
      *error = "'" + std::string(text) + "': '" + std::string(sym) +
               "' is not a symbol name (C++ symbols are given mangled)";
      return std::nullopt;
    }
    p.symbol = std::string(sym);
    return p;
  }
  p.kind = ProbeSpec::Kind::Usdt;
  if (!valid_identifier(parts[1]) || !valid_identifier(parts[2])) {
    *error = "'" + std::string(text) + "': USDT provider and name must be identifiers";
    return std::nullopt;
  }
  p.provider = std::string(parts[1]);
  p.name = std::string(parts[2]);
  return p;
}

std::optional<MarkerSpec> parse_marker(std::string_view text, std::string* error) {
  MarkerSpec m;
  m.text = std::string(text);
  // Presets: glib, libuv, and glib=BINARY / libuv=BINARY.
  std::string_view head = text.substr(0, text.find('='));
  if (head == "glib" || head == "libuv") {
    m.preset = head == "glib" ? MarkerSpec::Preset::Glib : MarkerSpec::Preset::Libuv;
    if (head.size() < text.size()) {
      m.preset_binary = std::string(text.substr(head.size() + 1));
      if (m.preset_binary.empty()) {
        *error = "'" + std::string(text) + "': no binary after '='";
        return std::nullopt;
      }
    }
    return m;
  }
  auto halves = split(text, ',');
  if (halves.size() != 2) {
    *error = "'" + std::string(text) +
             "' is not BEGIN_SPEC,END_SPEC (or glib, libuv, glib=BINARY, libuv=BINARY)";
    return std::nullopt;
  }
  auto begin = parse_probe(halves[0], error);
  if (!begin) return std::nullopt;
  auto end = parse_probe(halves[1], error);
  if (!end) return std::nullopt;
  m.begin = std::move(*begin);
  m.end = std::move(*end);
  return m;
}

}  // namespace jankbpf
