// A test that cannot run here. Under CI (CI=true) that is a failure: the
// project's machines have what every test needs, and a test that quietly
// returns would pass without asserting. Elsewhere it warns with the reason
// and ends the test (Catch2 v2 has no skip).
#pragma once

#include <cstdlib>
#include <cstring>

namespace jankbpf::test {
inline bool under_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::strcmp(ci, "true") == 0;
}
}  // namespace jankbpf::test

#define SKIP_UNLESS(cond, why)                                      \
  do {                                                              \
    if (!(cond)) {                                                  \
      if (::jankbpf::test::under_ci()) FAIL("cannot run under CI: " << why); \
      WARN("skipped: " << why);                                     \
      return;                                                       \
    }                                                               \
  } while (0)
