// Whether this process may load and attach jankbpf's BPF programs.
#pragma once

#include <string>

namespace jankbpf {

// Empty when the effective capabilities suffice; otherwise what is missing,
// phrased for the user.
std::string missing_privileges();

}  // namespace jankbpf
