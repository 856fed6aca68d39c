// KernelFuncs: the kernel's function names and BTF ids, read by one pass
// over its BTF, must agree with libbpf's full parse, and a malformed blob
// must give an error, never a read outside it.
#include <bpf/btf.h>
#include <linux/btf.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bpf/kernel_funcs.h"
#include "skip.h"

using jankbpf::KernelFuncs;

namespace {

// A small BTF blob: int, struct of two ints, a func proto with one param,
// FUNCs "alpha" and "beta", an enum, and a var.
std::vector<uint8_t> small_btf() {
  std::string strs("\0int\0pair\0a\0b\0alpha\0beta\0x\0e\0v\0", 34);
  auto off = [&](const char* s) { return static_cast<uint32_t>(strs.find(std::string(s) + '\0', 1)); };
  std::vector<uint32_t> t;
  auto type = [&](uint32_t name, uint32_t kind, uint32_t vlen, uint32_t size_or_type) {
    t.insert(t.end(), {name, (kind << 24) | vlen, size_or_type});
  };
  type(off("int"), BTF_KIND_INT, 0, 4);  // 1
  t.push_back(32);                       // encoding: 32 bits
  type(off("pair"), BTF_KIND_STRUCT, 2, 8);  // 2
  t.insert(t.end(), {off("a"), 1, 0, off("b"), 1, 32});
  type(0, BTF_KIND_FUNC_PROTO, 1, 1);  // 3: int (int x)
  t.insert(t.end(), {off("x"), 1});
  type(off("alpha"), BTF_KIND_FUNC, 0, 3);  // 4
  type(off("e"), BTF_KIND_ENUM, 1, 4);      // 5
  t.insert(t.end(), {off("e"), 7});
  type(off("v"), BTF_KIND_VAR, 0, 1);  // 6
  t.push_back(1);
  type(off("beta"), BTF_KIND_FUNC, 0, 3);  // 7

  btf_header h{};
  h.magic = BTF_MAGIC;
  h.version = BTF_VERSION;
  h.hdr_len = sizeof h;
  h.type_off = 0;
  h.type_len = static_cast<uint32_t>(t.size() * 4);
  h.str_off = h.type_len;
  h.str_len = static_cast<uint32_t>(strs.size());
  std::vector<uint8_t> b(sizeof h + h.type_len + h.str_len);
  memcpy(b.data(), &h, sizeof h);
  memcpy(b.data() + sizeof h, t.data(), h.type_len);
  memcpy(b.data() + sizeof h + h.type_len, strs.data(), strs.size());
  return b;
}

}  // namespace

TEST_CASE("KernelFuncs finds FUNC entries by name, with their ids", "[kernel-funcs]") {
  auto k = KernelFuncs::from_raw(small_btf());
  REQUIRE(k.ok());
  CHECK(k.size() == 2);
  CHECK(k.id("alpha") == 4);
  CHECK(k.id("beta") == 7);
  CHECK_FALSE(k.has("pair"));  // a struct, not a function
  CHECK_FALSE(k.has("x"));     // a parameter
  CHECK_FALSE(k.has("alph"));
  CHECK_FALSE(k.has(""));
  KernelFuncs moved = std::move(k);  // names stay valid across a move
  CHECK(moved.id("beta") == 7);
}

TEST_CASE("KernelFuncs refuses malformed BTF with a reason, reading only inside it", "[kernel-funcs]") {
  const auto good = small_btf();
  // Every truncation: an error or (cut inside the strings) fewer names, never a crash.
  for (size_t n = 0; n < good.size(); n++) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<long>(n));
    auto k = KernelFuncs::from_raw(cut);
    if (n < sizeof(btf_header)) CHECK(k.error() == "BTF shorter than its header");
    else CHECK_FALSE(k.ok());  // the header's sections reach past the end
  }
  auto bad = good;
  bad[0] ^= 0xff;
  CHECK(KernelFuncs::from_raw(bad).error().find("byte order") != std::string::npos);
  // A type of a kind this does not know stops the walk: said, not guessed past.
  bad = good;
  uint32_t info;
  memcpy(&info, bad.data() + sizeof(btf_header) + 4, 4);
  info = (31u << 24) | (info & 0xffff);
  memcpy(bad.data() + sizeof(btf_header) + 4, &info, 4);
  auto k = KernelFuncs::from_raw(bad);
  CHECK(k.error() == "BTF type 1 of unknown kind 31");
  CHECK(k.size() == 0);
  // A struct whose member count runs past the type section.
  bad = good;
  memcpy(&info, bad.data() + sizeof(btf_header) + 16 + 4, 4);
  info = (info & 0xffff0000u) | 0xffff;
  memcpy(bad.data() + sizeof(btf_header) + 16 + 4, &info, 4);
  CHECK(KernelFuncs::from_raw(bad).error() == "BTF type 2 cut short");
  // A name offset past the strings is skipped, not read.
  bad = good;
  const size_t alpha_at = sizeof(btf_header) + 4 * (4 + 9 + 5);  // after int, struct, proto
  uint32_t far = 1u << 30;
  memcpy(bad.data() + alpha_at, &far, 4);
  k = KernelFuncs::from_raw(bad);
  CHECK(k.ok());
  CHECK_FALSE(k.has("alpha"));
  CHECK(k.id("beta") == 7);
}

TEST_CASE("KernelFuncs agrees with libbpf on this kernel's BTF", "[kernel-funcs]") {
  SKIP_UNLESS(access("/sys/kernel/btf/vmlinux", R_OK) == 0, "no /sys/kernel/btf/vmlinux on this kernel");
  auto k = KernelFuncs::load();
  REQUIRE(k.ok());
  std::unique_ptr<btf, void (*)(btf*)> lib(btf__load_vmlinux_btf(), btf__free);
  REQUIRE(lib);
  size_t funcs = 0;
  for (uint32_t i = 1; i < btf__type_cnt(lib.get()); i++)
    funcs += BTF_INFO_KIND(btf__type_by_id(lib.get(), i)->info) == BTF_KIND_FUNC;
  CHECK(k.size() == funcs);
  for (const char* name : {"schedule", "do_sys_poll", "bpf_task_from_pid", "__x64_sys_ppoll", "__arm64_sys_ppoll",
                           "__x64_sys_epoll_wait", "__ia32_sys_setpgid", "no_such_function_here"}) {
    INFO(name);
    const int want = btf__find_by_name_kind(lib.get(), name, BTF_KIND_FUNC);
    CHECK(k.id(name) == static_cast<uint32_t>(want > 0 ? want : 0));
  }
}
