// Task markers as the user writes them: `--marker BEGIN_SPEC,END_SPEC`,
// or a runtime preset (`glib`, `libuv`, optionally `=BINARY`). Parsing only:
// binaries, symbols and probes are looked up when attaching (markers.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace jankbpf {

// One probe site.
//   BINARY:SYMBOL            uprobe at the function's entry
//   BINARY:SYMBOL%return     uretprobe: at its return
//   BINARY:PROVIDER:NAME     USDT probe (sys/sdt.h), semaphore honoured
// SYMBOL is the name in the ELF symbol table (mangled for C++).
struct ProbeSpec {
  enum class Kind { Uprobe, Uretprobe, Usdt };
  Kind kind = Kind::Uprobe;
  std::string binary;  // as written: a path, or a name looked up in PATH / library dirs
  std::string symbol;  // uprobes
  std::string provider, name;  // USDT

  // "uprobe", "uretprobe", "usdt"
  const char* kind_name() const;
  // SYMBOL, SYMBOL%return or PROVIDER:NAME
  std::string probe() const;
  std::string to_string() const { return binary + ":" + probe(); }
};

struct MarkerSpec {
  enum class Preset { None, Glib, Libuv };
  Preset preset = Preset::None;
  std::string preset_binary;  // glib=BINARY / libuv=BINARY; "" : the system's
  ProbeSpec begin, end;       // Preset::None
  std::string text;           // as given
};

// Parses one --marker value; nullopt with *error saying what is wrong.
std::optional<MarkerSpec> parse_marker(std::string_view text, std::string* error);
std::optional<ProbeSpec> parse_probe(std::string_view text, std::string* error);

}  // namespace jankbpf
