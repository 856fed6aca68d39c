// Detector, the marker probes: uprobes and USDT probes attached on demand
// (a preset's binary, a process's own copy of a marked file), each link kept
// until released or exit (bpf/marker_links.h).
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "bpf/detector.h"
#include "bpf/libbpf_log.h"
#include "jank.skel.h"

namespace jankbpf {

bool Detector::attach_uprobe(const std::string& binary, uint64_t offset, bool retprobe, bool begin,
                             uint64_t cookie, std::string* error, uint64_t* id) {
  if (!markers_ || detaching_) {
    *error = detaching_ ? "jankbpf is stopping" : "marker programs not loaded";
    return false;
  }
  std::string why;
  std::optional<uint32_t> slot;
  const int pfd = open_uprobe_event(binary, offset, retprobe, -1, &why);
  bpf_link* link =
      pfd < 0 ? nullptr : attach_kept(begin ? skel_->progs.jb_mark_begin : skel_->progs.jb_mark_end, pfd, cookie, &slot, &why);
  if (!link) {
    *error = why;
    return false;
  }
  return keep_marker_link(link, slot, error, id);
}

// A marker probe's link is kept until released or exit; a failed attach
// says why (errno, and libbpf's last message).
bool Detector::keep_marker_link(bpf_link* link, std::optional<uint32_t> slot, std::string* error, uint64_t* id) {
  if (!link) {
    int err = errno;
    std::string why = last_libbpf_line();
    *error = std::string(strerror(err)) + (why.empty() ? "" : " (" + why + ")");
    return false;
  }
  if (uint64_t kept = marker_links_.keep(link, slot); id) *id = kept;
  return true;
}

bool Detector::attach_usdt(const std::string& binary, const std::string& provider,
                           const std::string& name, bool begin, uint64_t cookie, std::string* error, uint64_t* id) {
  if (!markers_ || detaching_) {
    *error = detaching_ ? "jankbpf is stopping" : "marker programs not loaded";
    return false;
  }
  LIBBPF_OPTS(bpf_usdt_opts, opts, .usdt_cookie = cookie);
  clear_libbpf_log();
  bpf_link* link = bpf_program__attach_usdt(begin ? skel_->progs.jb_usdt_begin : skel_->progs.jb_usdt_end,
                                            -1, binary.c_str(), provider.c_str(), name.c_str(), &opts);
  return keep_marker_link(link, std::nullopt, error, id);  // libbpf keeps the USDT probes' events
}

}  // namespace jankbpf
