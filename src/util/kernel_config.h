// The running kernel's build configuration, where systems keep it:
// /boot/config-<release> (installed with Debian's and most distributions'
// kernels), else /proc/config.gz (CONFIG_IKCONFIG_PROC). Both are read as
// any file jankbpf did not write: root-owned, no symlinks, bounded.
#pragma once

#include <string>
#include <string_view>

namespace jankbpf {

// The value of CONFIG_<name> in a config file's text ("250", "y", "\"x\""),
// or "" when it is absent or "# CONFIG_<name> is not set".
std::string config_value(std::string_view text, std::string_view name);

// The running kernel's config text. On failure *error says what was tried;
// *where names the file read.
bool read_kernel_config(std::string* text, std::string* where, std::string* error);

}  // namespace jankbpf
