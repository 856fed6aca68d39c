#include "util/kernel_config.h"

#include <sys/utsname.h>
#include <unistd.h>
#include <zlib.h>

#include "util/safe_open.h"

namespace jankbpf {

namespace {

// A config is ~250 KB; anything past this is not one.
constexpr size_t kMaxConfig = 8u << 20;

OpenPolicy config_policy() {
  OpenPolicy p;
  p.max_size = kMaxConfig;
  p.owners = {0};
  return p;
}

bool read_gzip(const std::string& path, std::string* text, std::string* error) {
  Opened f = open_untrusted(path, config_policy());
  if (!f) {
    *error = f.error;
    return false;
  }
  // gzdopen takes the descriptor over: hand it a duplicate.
  int fd = dup_cloexec(f.fd.get());
  gzFile gz = fd < 0 ? nullptr : gzdopen(fd, "rb");
  if (!gz) {
    if (fd >= 0) close(fd);
    *error = path + ": cannot read it as gzip";
    return false;
  }
  text->clear();
  char buf[65536];
  int n;
  while ((n = gzread(gz, buf, sizeof buf)) > 0) {
    if (text->size() + static_cast<size_t>(n) > kMaxConfig) {
      gzclose(gz);
      *error = path + ": over 8 MB uncompressed, not a kernel config";
      return false;
    }
    text->append(buf, static_cast<size_t>(n));
  }
  const bool ok = n == 0;
  gzclose(gz);
  if (!ok) *error = path + ": corrupt gzip data";
  return ok;
}

}  // namespace

std::string config_value(std::string_view text, std::string_view name) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.starts_with("CONFIG_")) continue;
    line.remove_prefix(7);
    if (!line.starts_with(name) || line.size() <= name.size() || line[name.size()] != '=') continue;
    line.remove_prefix(name.size() + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return std::string(line);
  }
  return "";
}

bool read_kernel_config(std::string* text, std::string* where, std::string* error) {
  struct utsname u {};
  std::string boot_error;
  if (uname(&u) == 0) {
    *where = std::string("/boot/config-") + u.release;
    if (read_untrusted(*where, config_policy(), *text, &boot_error)) return true;
  }
  *where = "/proc/config.gz";
  std::string proc_error;
  if (read_gzip(*where, text, &proc_error)) return true;
  *error = boot_error.empty() ? proc_error : boot_error + "; " + proc_error;
  return false;
}

}  // namespace jankbpf
