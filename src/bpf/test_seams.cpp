#include "bpf/test_seams.h"

#include <cerrno>
#include <cstdlib>

#include "util/log.h"

namespace jankbpf::test_seams {
namespace {

// A decimal in [1, max], or 0 (unset, or said to be bad and ignored).
uint32_t env_number(const char* name, uint32_t max) {
  const char* v = getenv(name);
  if (!v || !*v) return 0;
  char* end = nullptr;
  errno = 0;
  unsigned long n = strtoul(v, &end, 10);
  if (errno || *end || n < 1 || n > max || v[0] == '-') {
    log::warn("%s='%s' ignored: a test seam that wants a number from 1 to %u", name, v, max);
    return 0;
  }
  log::warn("test seam %s=%lu in effect", name, n);
  return static_cast<uint32_t>(n);
}

}  // namespace

// Read once: the detector may load several times (see load_best).
uint32_t map_entries() {
  static const uint32_t n = env_number("JANKBPF_MAP_ENTRIES", 1u << 20);
  return n;
}

bool one_ring() {
  static const bool on = env_number("JANKBPF_TEST_ONE_RING", 1) == 1;
  return on;
}

uint32_t reader_pause_ms() {
  static const uint32_t n = env_number("JANKBPF_TEST_READER_PAUSE_MS", 60000);
  return n;
}

uint32_t trace_setup_delay_ms() {
  static const uint32_t n = env_number("JANKBPF_TEST_TRACE_SETUP_DELAY_MS", 60000);
  return n;
}

bool hide_returns() {
  static const bool on = env_number("JANKBPF_TEST_HIDE_RETURNS", 1) == 1;
  return on;
}

// This thread's switch-ins are ignored, as where a VM kernel hides the
// switch away from its host agent's threads (the unseen-switch paths, on
// any host).
uint32_t hide_switches_to() {
  static const uint32_t n = env_number("JANKBPF_TEST_HIDE_SWITCHES_TO", 1u << 22);
  return n;
}

// This thread's switch-outs are ignored, as where a VM kernel hides the
// switch to its host agent's threads (the unseen-sleep repair at a wakeup).
uint32_t hide_switches_from() {
  static const uint32_t n = env_number("JANKBPF_TEST_HIDE_SWITCHES_FROM", 1u << 22);
  return n;
}

uint32_t slow_open_ms() {
  static const uint32_t n = env_number("JANKBPF_TEST_SLOW_OPEN_MS", 60000);
  return n;
}

bool no_runtime_read() {
  static const bool on = env_number("JANKBPF_TEST_NO_RUNTIME_READ", 1) == 1;
  return on;
}

bool no_irq_text() {
  static const bool on = env_number("JANKBPF_TEST_NO_IRQ_TEXT", 1) == 1;
  return on;
}

}  // namespace jankbpf::test_seams
