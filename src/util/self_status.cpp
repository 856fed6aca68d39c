#include "util/self_status.h"

#include <cstdio>
#include <cstring>

namespace jankbpf {

std::string self_status(std::string_view key) {
  FILE* f = std::fopen("/proc/self/status", "re");
  if (!f) return {};
  char line[256];
  std::string out;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, key.data(), key.size()) != 0 || line[key.size()] != ':') continue;
    const char* v = line + key.size() + 1;
    v += std::strspn(v, " \t");
    out.assign(v, std::strcspn(v, "\n"));
    break;
  }
  std::fclose(f);
  return out;
}

}  // namespace jankbpf
