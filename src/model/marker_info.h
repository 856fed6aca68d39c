// What a task record says about the marker that bounded it: part of the
// model, so records need nothing from the marker machinery that fills it.
#pragma once

#include <cstdint>
#include <string>

namespace jankbpf {

struct MarkerInfo {
  uint32_t id = 0;
  std::string type;     // begin probe: "uprobe", "uretprobe", "usdt"
  std::string binary;   // resolved path of the binary holding it
  std::string probe;    // begin probe: SYMBOL, SYMBOL%return, PROVIDER:NAME
  std::string name;     // the runnable's name when the probe gives none
  std::string runtime;  // "glib", "libuv", or "" for a custom --marker
};

}  // namespace jankbpf
