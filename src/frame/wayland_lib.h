// Where jankbpf's frame probes go in a libwayland-client: file offsets of
// the two exported functions every request and every new listener pass
// through, and of the library's own PLT stub for ffi_call, which
// wl_closure_invoke (not exported) calls once per event dispatched to a
// listener -- so only libwayland-client's calls to libffi trap, never a
// GObject marshaller's or ctypes'. The library is read as untrusted ELF.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace jankbpf::frame {

struct WaylandSites {
  std::string path;          // the library file the probes attach to
  uint64_t request = 0;      // wl_proxy_marshal_array_flags
  uint64_t listener = 0;     // wl_proxy_add_listener
  // Where events are seen: on x86_64 the one call of ffi_call's PLT entry
  // (wl_closure_invoke's), an emulated instruction; else the entry's jump
  // through the GOT (aarch64's adrp is emulated too).
  uint64_t event = 0;
};

// The system's libwayland-client.so.0 (PATH, LD_LIBRARY_PATH, the library
// directories), or nullopt with *error saying what is missing.
std::optional<WaylandSites> find_wayland_client(std::string* error);
// The sites in the library at `path`.
std::optional<WaylandSites> wayland_sites(const std::string& path, std::string* error);

// The file offset of the PLT entry's indirect jump through the GOT slot at
// `got` (an ELF address), from the entry's bytes: x86_64 `jmp *d(%rip)`
// (optionally after endbr64, with a bnd prefix), aarch64 `adrp x16; ldr
// x17, [x16, #o]`. `code` holds the section's bytes at ELF address `addr`.
// Public for the unit tests.
std::optional<uint64_t> plt_jump_to(const uint8_t* code, size_t size, uint64_t addr, uint64_t got,
                                    uint16_t machine);

}  // namespace jankbpf::frame
