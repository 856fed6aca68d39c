// The pieces that keep jankbpf's memory small (issue 30), on real inputs:
// the ring reader's one mapping (records that wrap, busy and discarded
// records, in the kernel's layout), and /proc/kallsyms read line by line
// across its read buffer.
#include <linux/bpf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "app/jvm_targets.h"
#include "bpf/ring_reader.h"
#include "stack/kallsyms.h"

using namespace jankbpf;
using namespace jankbpf::stack;

namespace {

// A ring in the kernel's layout: consumer page, producer page, data.
struct FakeRing {
  static constexpr size_t kPage = 4096;
  uint64_t size;
  std::vector<uint8_t> consumer = std::vector<uint8_t>(kPage);
  std::vector<uint8_t> producer;  // producer page, then the data
  uint64_t prod = 0;

  explicit FakeRing(uint64_t size) : size(size), producer(kPage + size) {}
  uint64_t& cons_pos() { return *reinterpret_cast<uint64_t*>(consumer.data()); }
  void publish() { std::memcpy(producer.data(), &prod, 8); }
  // Writes one record as the kernel does: header, then the body, which may
  // wrap past the end of the data area.
  void put(const std::string& body, uint32_t flags = 0) {
    uint8_t* data = producer.data() + kPage;
    const uint64_t at = prod & (size - 1);
    uint32_t hdr[2] = {static_cast<uint32_t>(body.size()) | flags, 0};
    std::memcpy(data + at, hdr, 8);
    for (size_t i = 0; i < body.size(); i++) data[(at + 8 + i) & (size - 1)] = static_cast<uint8_t>(body[i]);
    prod += (body.size() + 8 + 7) & ~size_t{7};
  }
};

}  // namespace

TEST_CASE("ring reader: records in order, one mapping, wrapped ones copied whole", "[footprint][ring]") {
  FakeRing ring(4096);
  std::vector<std::string> got;
  auto r = RingReader::over_memory(ring.consumer.data(), ring.producer.data(), FakeRing::kPage, ring.size,
                                   [&](std::span<const uint8_t> rec) { got.emplace_back(rec.begin(), rec.end()); });
  REQUIRE(r);
  CHECK(r->consume() == 0);

  // Fill most of the ring, read it, then write records that wrap.
  std::string a(3000, 'a'), b(500, 'b');
  ring.put(a);
  ring.put(b);
  ring.publish();
  CHECK(r->consume() == 2);
  REQUIRE(got.size() == 2);
  CHECK(got[0] == a);
  CHECK(got[1] == b);
  CHECK(ring.cons_pos() == ring.prod);

  // 3512 bytes used: a 1000-byte body starting at 3520 wraps.
  std::string c;
  for (int i = 0; i < 1000; i++) c.push_back(static_cast<char>('A' + i % 26));
  ring.put(c);
  ring.put("discarded", BPF_RINGBUF_DISCARD_BIT);
  ring.put("after");
  ring.publish();
  CHECK(r->consume() == 2);
  REQUIRE(got.size() == 4);
  CHECK(got[2] == c);
  CHECK(got[3] == "after");
  CHECK(r->wrapped() == 1);
  CHECK(ring.cons_pos() == ring.prod);

  // A record still being written stops the reader there, until committed.
  const uint64_t busy_at = ring.prod;
  ring.put("busy", BPF_RINGBUF_BUSY_BIT);
  ring.put("later");
  ring.publish();
  CHECK(r->consume() == 0);
  CHECK(ring.cons_pos() == busy_at);
  uint32_t len = 4;
  std::memcpy(ring.producer.data() + FakeRing::kPage + (busy_at & (ring.size - 1)), &len, 4);
  CHECK(r->consume() == 2);
  REQUIRE(got.size() == 6);
  CHECK(got[4] == "busy");
  CHECK(got[5] == "later");
}

TEST_CASE("kallsyms read line by line: lines across the read buffer, names across blocks", "[footprint][stack]") {
  char path[] = "/tmp/jankbpf-kallsyms-XXXXXX";
  int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  std::string text, expect_last;
  // 20,000 symbols of ~40-byte lines: several 64 KB reads, several name blocks.
  for (int i = 0; i < 20000; i++) {
    char line[128];
    const std::string name = "function_number_" + std::to_string(i) + std::string(i % 17, 'x');
    std::snprintf(line, sizeof line, "%016llx %c %s\n", 0xffffffff81000000ull + i * 0x100ull, i % 3 ? 't' : 'T',
                  name.c_str());
    text += line;
    expect_last = name;
  }
  REQUIRE(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  ::close(fd);
  Kallsyms k = Kallsyms::load(path);
  Kallsyms p = Kallsyms::parse(text);
  ::unlink(path);
  REQUIRE(k.size() == 20000);
  CHECK(k.bad_lines() == 0);
  CHECK(p.size() == k.size());
  for (int i : {0, 1, 1637, 9999, 19999}) {
    auto h = k.lookup(0xffffffff81000000ull + i * 0x100ull + 8);
    REQUIRE(h);
    CHECK(h->name == "function_number_" + std::to_string(i) + std::string(i % 17, 'x'));
    CHECK(h->offset == 8);
  }
  CHECK(k.lookup(0xffffffff81000000ull + 19999 * 0x100ull)->name == expect_last);
}

TEST_CASE("JVM looks: a target seen twice without libjvm is not read again", "[footprint][jvm]") {
  // --comm with 10,000 processes read every maps file at each of 8 looks
  // (bench section 12); a process is a JVM some 100 ms after its exec.
  jankbpf::JvmTargets targets({getpid()}, "");
  for (int i = 0; i < 5; i++) CHECK(targets.look().empty());
  CHECK(targets.maps_reads() == 2);
}

TEST_CASE("JVM looks: the schedule ends once every named target is settled", "[footprint][jvm]") {
  // The bench's idle goal: watching one idle non-JVM woke jankbpf at every
  // step of the 25 s schedule (5 context switches in its 30 s window).
  jankbpf::JvmTargets targets({getpid()}, "");
  CHECK(targets.next_delay_ms() == 100);  // not looked at yet
  targets.look();
  CHECK(targets.next_delay_ms() == 200);  // seen once without libjvm
  targets.look();
  CHECK(targets.next_delay_ms() == 0);    // twice: not a JVM, nothing left
  // --comm may name a new process at any look: its schedule runs out.
  jankbpf::JvmTargets by_name({getpid()}, "no-such-comm-xyz");
  by_name.look();
  by_name.look();
  for (uint64_t ms = 100; ms <= 12800; ms *= 2) CHECK(by_name.next_delay_ms() == ms);
  CHECK(by_name.next_delay_ms() == 0);
}
