// The --config JSON file (and the same keys as flags): anything that is not
// a valid MAIN_THREAD_JANK config must come back as a ConfigError — any
// other exception escaping is a crash here, as it would end jankbpf with an
// uncaught exception — and a config that builds must be inside the seed's
// bounds. The file is a memfd rewritten per input, opened by its
// /proc/self/fd path as load_file() opens any path.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "config/jank_config.h"

using namespace jankbpf;

namespace {

void check(const JankConfig& c) {
  if (c.log_type < 0 || c.log_type > 2) abort();
  if (c.sample_interval_ms < 50 || c.sample_interval_ms > 500) abort();
  if (c.ignore_startup_time_s < 3 || c.ignore_startup_time_s > 86400) abort();
  if (c.sample_count < 1 || c.sample_count > JankConfig::max_sample_count(c.sample_interval_ms)) abort();
  if (c.report_times_per_app < 1 || c.report_times_per_app > 3) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int fd = memfd_create("fuzz-config", MFD_CLOEXEC);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ftruncate(fd, 0) != 0) abort();
  if (size && pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) abort();

  ConfigBuilder b;
  try {
    b.load_file(path);
  } catch (const ConfigError&) {
  }
  // The first line again as one flag, KEY=VALUE, over the file's layer.
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string_view first = text.substr(0, text.find('\n'));
  if (size_t eq = first.find('='); eq != std::string_view::npos) {
    try {
      b.apply(first.substr(0, eq), first.substr(eq + 1));
    } catch (const ConfigError&) {
    }
  }
  try {
    check(b.build());
  } catch (const ConfigError& e) {
    if (std::string_view(e.what()).substr(0, 8) != "config: ") abort();
  }
  return 0;
}
