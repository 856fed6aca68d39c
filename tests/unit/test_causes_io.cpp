// Unit tests for the causes `fault` and `io` (src/cause/io_identity.*,
// their slices in attribute and why): the file at a faulting address from
// maps text, a device's name from uevent text (both hostile input), and
// what the record and the why line say.
#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <string>

#include "cause/attribute.h"
#include "cause/evidence.h"
#include "cause/identity.h"
#include "cause/io_identity.h"
#include "cause/stack_source.h"
#include "cause/syscalls.h"
#include "stack/maps.h"

using namespace jankbpf;
using namespace jankbpf::cause;

namespace {

constexpr pid_t kPid = 100;

const char* kMaps =
    "55d000000000-55d000001000 r--p 00000000 fe:01 1234 /usr/bin/app\n"
    "7f0000000000-7f0001000000 r--s 00200000 fe:01 99 /var/db/pages.db\n"
    "7f0002000000-7f0002001000 r--s 00000000 fe:01 77 /tmp/gone (deleted)\n"
    "7f0003000000-7f0003001000 rw-p 00000000 00:00 0 \n";

struct MapsIds : Identities {
  stack::ProcMaps maps = stack::ProcMaps::parse(kMaps);
  std::map<int, std::string> fds{{5, "/var/db/wal"}};
  std::string thread_comm(pid_t, pid_t) override { return ""; }
  bool thread_in(pid_t, pid_t) override { return false; }
  std::string fd_path(pid_t, int fd) override { return fds.count(fd) ? fds[fd] : ""; }
  std::string address_where(pid_t, uint64_t a) override { return where_in(maps, a); }
  CgroupInfo cgroup(uint64_t, uint32_t) override { return {}; }
  MappedFile mapped_file(pid_t, uint64_t a) override { return file_at(maps, a); }
  std::string device_name(uint32_t major, uint32_t minor) override {
    return major == 254 && minor == 0 ? "vda" : major == 254 && minor == 1 ? "vda1" : "";
  }
  bool fd_device(pid_t, int fd, BlockDevice* out) override {
    if (fd != 5) return false;
    *out = {254, 1, ""};
    return true;
  }
};

jb_cause_slice& add(jb_cause_event& e, uint32_t kind, double ms) {
  jb_cause_slice& s = e.slices[e.nslices++];
  s.kind = kind;
  s.ns = static_cast<uint64_t>(ms * 1e6);
  s.max_ns = s.ns;
  s.count = 1;
  s.nr = -1;
  e.kind_ns[kind] += s.ns;
  return s;
}

long nr_of(const char* name) {
  for (long nr = 0; nr < 512; nr++)
    if (syscall_name(nr) == name) return nr;
  return -1;
}

}  // namespace

TEST_CASE("a faulting address names its file, offset and device; junk names nothing", "[causes][io]") {
  const auto maps = stack::ProcMaps::parse(kMaps);
  MappedFile f = file_at(maps, 0x7f0000003123);
  REQUIRE(f.found);
  CHECK(f.path == "/var/db/pages.db");
  CHECK(f.offset == 0x200000 + 0x3123);
  CHECK((f.dev_major == 0xfe && f.dev_minor == 1 && f.inode == 99));
  // A deleted file is named by device and inode, never by its old name.
  f = file_at(maps, 0x7f0002000010);
  REQUIRE(f.found);
  CHECK(f.path.empty());
  CHECK(f.name() == "254:1:77");
  // Anonymous memory and unmapped addresses: no file.
  CHECK_FALSE(file_at(maps, 0x7f0003000000).found);
  CHECK_FALSE(file_at(maps, 0x1000).found);
  // A name with control characters is escaped; a pgoff near the top does not wrap.
  const auto hostile = stack::ProcMaps::parse(
      "7f0000000000-7f0000002000 r--s fffffffffffff000 08:01 5 /x\x1b[2Jy\n");
  f = file_at(hostile, 0x7f0000001000);
  if (f.found) {
    CHECK(f.path.find('\x1b') == std::string::npos);
    CHECK(f.offset == 0);
  }
}

TEST_CASE("a uevent's DEVNAME is taken only when it is a plain device name", "[causes][io]") {
  CHECK(uevent_devname("MAJOR=254\nMINOR=0\nDEVNAME=vda\nDEVTYPE=disk\n") == "vda");
  CHECK(uevent_devname("DEVNAME=nvme0n1p2") == "nvme0n1p2");
  CHECK(uevent_devname("DEVNAME=mapper/root-1.x_y") == "mapper/root-1.x_y");
  CHECK(uevent_devname("MAJOR=8\n") == "");
  CHECK(uevent_devname("DEVNAME=\n") == "");
  CHECK(uevent_devname("DEVNAME=../../etc/passwd\n") == "");
  CHECK(uevent_devname("DEVNAME=/dev/sda\n") == "");
  CHECK(uevent_devname("DEVNAME=sd\x1b[2Ja\n") == "");
  CHECK(uevent_devname("DEVNAME=a b\n") == "");
  CHECK(uevent_devname("DEVNAME=" + std::string(65, 'a')) == "");
  CHECK(kernel_dev(254u << 20 | 3).id() == "254:3");
}

TEST_CASE("a fault slice names the file and the range of its faults; io the fd, device and requests",
          "[causes][io]") {
  MapsIds ids;
  CollectedStacks stacks;
  jb_cause_event e{};
  e.hdr.type = JB_EV_CAUSE;
  e.hdr.pid = kPid;
  e.hdr.tid = kPid;
  auto& f = add(e, JB_CAUSE_FAULT, 300);
  f.flags = JB_CSF_FAULT | JB_CSF_FAULT_ADDR | JB_CSF_BLOCKED;
  f.arg0 = 0x7f0000005000;
  f.count = 40;
  e.io.faults = 37;
  e.io.fault_lo = 0x7f0000001010;
  e.io.fault_hi = 0x7f0000024ff0;
  auto& io = add(e, JB_CAUSE_IO, 200);
  io.flags = JB_CSF_IO | JB_CSF_BLOCKED;
  io.nr = static_cast<int32_t>(nr_of("fsync"));
  REQUIRE(io.nr >= 0);
  io.arg0 = 5;
  e.io.rqs = 12;
  e.io.done = 12;
  e.io.bytes = 48 << 20;
  e.io.lat_ns = 150'000'000;
  e.io.lat_max_ns = 20'000'000;
  e.io.dev = 254u << 20;
  Evidence ev;
  ev.causes = e;
  TaskRecord r;
  r.proc.pid = kPid;
  r.tid = kPid;
  r.state = {100, 0, 0, 500};
  r.duration_ms = 600;
  attribute(r, ev, true, ids, stacks);
  REQUIRE(r.cause.size() == 2);
  const auto& fault = r.cause[0];
  CHECK(fault.kind == "fault");
  CHECK(fault.syscall.empty());
  CHECK(fault.file == "/var/db/pages.db");
  CHECK(fault.faults == 37);
  CHECK(fault.offset_lo == 0x201000);
  CHECK(fault.offset_hi == 0x225000);
  const auto& c = r.cause[1];
  CHECK(c.kind == "io");
  CHECK(c.fd_path == "/var/db/wal");
  // The requests' own device wins over the fd's filesystem's.
  CHECK((c.device == "254:0" && c.device_name == "vda"));
  CHECK((c.requests == 12 && c.bytes == (48u << 20) && c.device_ms == Approx(150)));
  CHECK(r.why ==
        "300 ms in major page faults (37 addresses) on /var/db/pages.db [0x201000, 0x225000); "
        "200 ms waiting for block I/O in fsync on /var/db/wal (device vda 254:0, 12 requests, 50.3 MB, "
        "device 150 ms); 100 ms running");
}

TEST_CASE("a fault without an address (no page_fault_user) and io without requests still say what they can",
          "[causes][io]") {
  MapsIds ids;
  CollectedStacks stacks;
  jb_cause_event e{};
  e.hdr.pid = kPid;
  auto& f = add(e, JB_CAUSE_FAULT, 300);
  f.flags = JB_CSF_FAULT | JB_CSF_BLOCKED;
  f.arg0 = 0x7f0000005000;  // not an address here: never resolved
  auto& io = add(e, JB_CAUSE_IO, 100);
  io.flags = JB_CSF_IO | JB_CSF_BLOCKED;
  io.nr = static_cast<int32_t>(nr_of("read"));
  io.arg0 = 5;
  Evidence ev;
  ev.causes = e;
  TaskRecord r;
  r.proc.pid = kPid;
  r.tid = kPid;
  r.state = {0, 0, 0, 400};
  r.duration_ms = 400;
  attribute(r, ev, true, ids, stacks);
  REQUIRE(r.cause.size() == 2);
  CHECK(r.cause[0].kind == "fault");
  CHECK(r.cause[0].file.empty());
  CHECK_FALSE(r.cause[0].has_address);
  CHECK((r.cause[1].device == "254:1" && r.cause[1].device_name == "vda1" && r.cause[1].requests == 0));
  CHECK(r.why == "300 ms in major page faults; 100 ms waiting for block I/O in read on /var/db/wal (device vda1 254:1)");
}
