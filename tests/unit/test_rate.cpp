// The per-process token bucket of off-CPU captures (include/jankbpf/rate.h),
// the arithmetic the BPF side runs.
#include <catch2/catch.hpp>
#include <cstdint>

#include "jankbpf/rate.h"

namespace {

constexpr uint64_t kSec = 1'000'000'000;

// Takes tokens at `now` until refused; the bucket's state is updated.
int take_all(uint64_t* full_at, uint64_t now, uint32_t per_sec) {
  int n = 0;
  for (uint64_t next; (next = jb_rate_take(*full_at, now, per_sec)) != 0; n++) *full_at = next;
  return n;
}

}  // namespace

TEST_CASE("a fresh bucket holds one second's worth, then is empty", "[rate]") {
  uint64_t full_at = 0;
  const uint64_t t0 = 1000 * kSec;
  CHECK(take_all(&full_at, t0, 100) == 100);
  CHECK(jb_rate_take(full_at, t0, 100) == 0);
  // A refusal leaves the bucket as it was.
  CHECK(full_at == t0 + kSec);
}

TEST_CASE("the bucket refills at the rate and never beyond full", "[rate]") {
  uint64_t full_at = 0;
  const uint64_t t0 = 5 * kSec;
  take_all(&full_at, t0, 100);
  // 10 ms: one token (100/s); 9.9 ms: none yet.
  CHECK(jb_rate_take(full_at, t0 + 9'900'000, 100) == 0);
  CHECK(take_all(&full_at, t0 + 10'000'000, 100) == 1);
  // Half a second more: 50.
  CHECK(take_all(&full_at, t0 + 510'000'000, 100) == 50);
  // An hour idle fills it to its size only.
  CHECK(take_all(&full_at, t0 + 3600 * kSec, 100) == 100);
}

TEST_CASE("a steady flood gets the rate over time", "[rate]") {
  uint64_t full_at = 0;
  int granted = 0;
  // One attempt per millisecond for 10 s at 100/s: the first second's burst
  // of 100, then 100 a second.
  for (uint64_t t = kSec; t < 11 * kSec; t += 1'000'000)
    if (uint64_t next = jb_rate_take(full_at, t, 100)) {
      full_at = next;
      granted++;
    }
  CHECK(granted >= 1099);
  CHECK(granted <= 1101);
}

TEST_CASE("the extremes of --offcpu-rate", "[rate]") {
  uint64_t full_at = 0;
  CHECK(take_all(&full_at, kSec, 1) == 1);
  CHECK(jb_rate_take(full_at, kSec + kSec - 1, 1) == 0);
  CHECK(jb_rate_take(full_at, 2 * kSec, 1) != 0);
  full_at = 0;
  CHECK(take_all(&full_at, kSec, JB_RATE_MAX) == JB_RATE_MAX);
  // Time 0 (a bucket before the clock moved) still works: 0 means refused
  // only as a result, never as a valid next state.
  full_at = 0;
  CHECK(jb_rate_take(full_at, 0, 10) == kSec / 10);
}

// --record-rate-uid: a bucket of ten seconds' worth, refilled at the rate
// (issue 26: a burst of many processes' janks passes, a flood does not).
TEST_CASE("a bucket may hold more than a second's worth", "[rate]") {
  uint64_t full_at = 0;
  const uint64_t t0 = 1000 * kSec;
  int n = 0;
  for (uint64_t next; (next = jb_rate_take_burst(full_at, t0, 100, 1000)) != 0; n++) full_at = next;
  CHECK(n == 1000);
  // A second later, 100 more; never more than the bucket's 1,000.
  n = 0;
  for (uint64_t next; (next = jb_rate_take_burst(full_at, t0 + kSec, 100, 1000)) != 0; n++) full_at = next;
  CHECK(n == 100);
  CHECK(jb_rate_take_burst(0, t0, 100, 1000) == t0 + kSec / 100);
  // jb_rate_take is the one-second bucket.
  CHECK(jb_rate_take(0, t0, 100) == jb_rate_take_burst(0, t0, 100, 100));
}
