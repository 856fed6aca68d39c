// SamplerCoverage: how much of a task's sampling window the clocks were off.
#include <catch2/catch.hpp>
#include <cstdint>

#include "sampling/sampler_coverage.h"

using jankbpf::SamplerCoverage;

TEST_CASE("clocks never on: the whole window is off", "[sampling]") {
  SamplerCoverage c;
  CHECK(c.off_within(100, 400) == 300);
  CHECK(c.off_within(400, 100) == 0);
}

TEST_CASE("clocks turned on late: off until then, on while still on", "[sampling]") {
  SamplerCoverage c;
  c.on(250);
  CHECK(c.off_within(100, 400) == 150);
  CHECK(c.off_within(300, 400) == 0);
  c.on(260);  // on already: the first turn-on stands
  CHECK(c.off_within(100, 400) == 150);
}

TEST_CASE("spans on and off add up, each counted once", "[sampling]") {
  SamplerCoverage c;
  c.on(100);
  c.off(200);
  c.off(210);  // off already
  c.on(300);
  c.off(350);
  CHECK(c.off_within(0, 400) == 400 - 100 - 50);
  CHECK(c.off_within(150, 320) == 170 - 50 - 20);
  CHECK(c.off_within(200, 300) == 100);
}

TEST_CASE("only the last spans are kept: older time counts as off", "[sampling]") {
  SamplerCoverage c;
  for (uint64_t i = 0; i < SamplerCoverage::kSpans + 10; i++) {
    c.on(i * 10);
    c.off(i * 10 + 5);
  }
  CHECK(c.off_within(0, 50) == 50);  // forgotten
  const uint64_t last = (SamplerCoverage::kSpans + 9) * 10;
  CHECK(c.off_within(last, last + 10) == 5);
}
