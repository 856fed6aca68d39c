#include "util/privileges.h"

#include <cstdlib>
#include <string>

#include "util/self_status.h"

namespace jankbpf {
namespace {

constexpr int kCapSysAdmin = 21;
constexpr int kCapPerfmon = 38;
constexpr int kCapBpf = 39;

unsigned long long effective_caps() {
  return std::strtoull(self_status("CapEff").c_str(), nullptr, 16);
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
