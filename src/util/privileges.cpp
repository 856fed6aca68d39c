#include "util/privileges.h"

#include <fstream>
#include <sstream>
#include <string>

namespace jankbpf {
namespace {

constexpr int kCapSysAdmin = 21;
constexpr int kCapPerfmon = 38;
constexpr int kCapBpf = 39;

unsigned long long effective_caps() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("CapEff:", 0) == 0) return std::stoull(line.substr(7), nullptr, 16);
  }
  return 0;
}

}  // namespace

std::string missing_privileges() {
  auto caps = effective_caps();
  auto has = [&](int cap) { return (caps >> cap) & 1ULL; };
  if (has(kCapSysAdmin) || (has(kCapBpf) && has(kCapPerfmon))) return "";
  return "jankbpf needs root: CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN) to load and attach "
         "its BPF programs, and CAP_SYS_PTRACE to read other processes' /proc entries; "
         "run it with sudo";
}

}  // namespace jankbpf
