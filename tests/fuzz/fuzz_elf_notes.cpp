// ELF notes a hostile binary carries: the GNU build-id (PT_NOTE segments
// and note sections, through libdw), the USDT notes of .note.stapsdt
// (our own walk), the raw note list of /sys/kernel/notes, plus what
// ElfImage reads on the way (program headers, .gnu_debuglink, symbols).
// The input is the whole file: an ELF image built in memory (a memfd, as
// ElfImage parses from a private memfd copy) and, the same bytes, a raw
// note list. Truncated, overlapping and huge notes are the seeds' business.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "elf/build_id.h"
#include "markers/probe_elf.h"
#include "stack/elf_image.h"
#include "stack/kallsyms.h"

using namespace jankbpf;
using namespace jankbpf::stack;

namespace {

void hex_id(const std::string& id) {
  if (id.size() % 2 || id.size() > 128) abort();
  for (char c : id)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) abort();
}

// Reads every byte of a string so ASan checks where it points.
volatile size_t sink;
void touch(std::string_view s) {
  size_t h = 0;
  for (char c : s) h = h * 31 + static_cast<unsigned char>(c);
  sink = h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view raw(reinterpret_cast<const char*>(data), size);
  hex_id(build_id_from_notes(raw));

  Fd mem(memfd_create("fuzz-elf", MFD_CLOEXEC));
  if (!mem || (size && write(mem.get(), data, size) != static_cast<ssize_t>(size))) abort();
  hex_id(read_build_id(mem.get()));

  auto img = ElfImage::open(std::move(mem));
  if (!img) return 0;
  hex_id(img->build_id());
  if (img->debuglink().find('/') != std::string::npos) abort();
  for (const SdtProbe& p : sdt_probes(img->elf())) {
    touch(p.provider);
    touch(p.name);
    touch(p.args);
  }
  const auto& syms = img->symbols();
  for (const ElfSymbol& s : syms) touch(s.name);
  for (size_t i = 0; i < syms.size() && i < 64; ++i) {
    const ElfSymbol* hit = lookup_symbol(syms, syms[i].addr + syms[i].size / 2);
    if (hit) touch(hit->name);
  }
  (void)img->load_bias(0x400000, 0);
  (void)img->load_bias(0x7f0000000000, 0x1000);
  char buf[16];
  (void)img->read(img->file_size() - 8, buf, sizeof buf);  // must refuse, not overrun
  (void)img->read(0, buf, 8);
  return 0;
}
