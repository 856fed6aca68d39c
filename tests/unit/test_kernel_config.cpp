// The kernel's tick rate from its config: a wrong CONFIG_HZ would make the
// BPF side call long tasks short (a missed jank), so anything that is not
// plainly a tick rate must give 0 (every task's end then reads the clock).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "bpf/features.h"
#include "skip.h"
#include "util/kernel_config.h"

using jankbpf::config_value;
using jankbpf::probe::tick_rate_of;

TEST_CASE("config_value finds the option itself, not one it prefixes", "[kernel-config]") {
  const std::string text =
      "# Automatically generated file; DO NOT EDIT.\n"
      "CONFIG_HZ_250=y\n"
      "# CONFIG_HZ_1000 is not set\n"
      "CONFIG_HZ=250\n"
      "CONFIG_HZ_PERIODIC_X=n\n"
      "CONFIG_LOCALVERSION=\"-cloud\"\r\n";
  CHECK(config_value(text, "HZ") == "250");
  CHECK(config_value(text, "HZ_250") == "y");
  CHECK(config_value(text, "HZ_1000").empty());
  CHECK(config_value(text, "LOCALVERSION") == "\"-cloud\"");
  CHECK(config_value(text, "H").empty());
  CHECK(config_value("CONFIG_HZ=100", "HZ") == "100");  // no final newline
  CHECK(config_value("", "HZ").empty());
}

TEST_CASE("tick_rate_of takes only a plain tick rate", "[kernel-config]") {
  CHECK(tick_rate_of("CONFIG_HZ=250\n") == 250);
  CHECK(tick_rate_of("CONFIG_HZ=1000\n") == 1000);
  CHECK(tick_rate_of("CONFIG_HZ=100\r\n") == 100);
  CHECK(tick_rate_of("# CONFIG_HZ is not set\n") == 0);
  CHECK(tick_rate_of("CONFIG_HZ=\n") == 0);
  CHECK(tick_rate_of("CONFIG_HZ=0\n") == 0);
  CHECK(tick_rate_of("CONFIG_HZ=5\n") == 0);
  CHECK(tick_rate_of("CONFIG_HZ=99999\n") == 0);
  CHECK(tick_rate_of("CONFIG_HZ=99999999999999999999\n") == 0);
  CHECK(tick_rate_of("CONFIG_HZ=250x\n") == 0);
  CHECK(tick_rate_of("CONFIG_HZ=-250\n") == 0);
  CHECK(tick_rate_of("CONFIG_HZ= 250\n") == 0);
  CHECK(tick_rate_of(std::string("CONFIG_HZ=2\0" "50\n", 15)) == 0);
}

TEST_CASE("this machine's kernel config is found and names a tick rate", "[kernel-config]") {
  std::string text, where, error;
  const bool ok = jankbpf::read_kernel_config(&text, &where, &error);
  SKIP_UNLESS(ok, "no kernel config here: " << error);
  INFO(where);
  const uint32_t hz = tick_rate_of(text);
  CHECK((hz == 100 || hz == 250 || hz == 300 || hz == 1000));
}
