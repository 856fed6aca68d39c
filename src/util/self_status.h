// Fields of this process's own /proc/self/status.
#pragma once

#include <string>
#include <string_view>

namespace jankbpf {

// The text after "KEY:" (leading blanks dropped, e.g. "23456 kB" for
// VmHWM, "000001ffffffffff" for CapEff); empty when /proc or the key is
// not there.
std::string self_status(std::string_view key);

}  // namespace jankbpf
