// Detector, the frames side (bpf/frames.bpf.h): the libwayland-client
// uprobes, the `frames` ring, each process's refresh interval, and the
// per-thread sampler's filter program.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "bpf/detector.h"
#include "bpf/libbpf_log.h"
#include "bpf/program_select.h"
#include "jank.skel.h"

namespace jankbpf {

void configure_frames(jank_bpf* skel, const DetectorConfig& cfg) {
  for (auto* p : {skel->progs.jb_wl_request, skel->progs.jb_wl_listener, skel->progs.jb_wl_event}) {
    bpf_program__set_autoload(p, cfg.frames);
    bpf_program__set_autoattach(p, false);
  }
  bpf_program__set_autoload(skel->progs.jb_frame_sample, cfg.frames);
  skel->rodata->frames_enabled = cfg.frames;
  skel->rodata->frame_interval_ns = cfg.frame_interval_ns;
  skel->rodata->frame_sample_period_ns = cfg.frame_sample_period_ns;
  if (!cfg.frames) {
    // Unused: the smallest each map may be.
    bpf_map__set_max_entries(skel->maps.frames, 4096);
    for (auto* m : {skel->maps.frame_threads, skel->maps.frame_callbacks, skel->maps.frame_feedbacks,
                    skel->maps.frame_interval, skel->maps.wl_ifaces, skel->maps.wl_fns})
      bpf_map__set_max_entries(m, 1);
  }
}

bool Detector::attach_frames(const std::string& library, uint64_t request, uint64_t listener, uint64_t event,
                             pid_t pid, std::string* error) {
  if (!frames_) {
    *error = "frame programs not loaded";
    return false;
  }
  struct Site {
    bpf_program* prog;
    uint64_t offset;
    const char* what;
  };
  const Site sites[] = {{skel_->progs.jb_wl_request, request, "wl_proxy_marshal_array_flags"},
                        {skel_->progs.jb_wl_listener, listener, "wl_proxy_add_listener"},
                        {skel_->progs.jb_wl_event, event, "ffi_call's PLT entry"}};
  for (const Site& s : sites) {
    std::string why;
    std::optional<uint32_t> slot;
    const int pfd = open_uprobe_event(library, s.offset, false, pid, &why);
    bpf_link* link = pfd < 0 ? nullptr : attach_kept(s.prog, pfd, 0, &slot, &why);
    if (!link) {
      *error = std::string("uprobe on ") + s.what + " in " + library + ": " + why;
      return false;
    }
    keep_extra(link, !slot);
  }
  return true;
}

int Detector::frames_fd() const { return frames_rb_ ? frames_rb_->fd() : -1; }

int Detector::drain_frames() { return frames_rb_ ? frames_rb_->consume() : 0; }

bool Detector::set_frame_interval(pid_t pid, uint64_t ns) {
  if (!frames_) return false;
  uint32_t key = static_cast<uint32_t>(pid);
  return bpf_map__update_elem(skel_->maps.frame_interval, &key, sizeof key, &ns, sizeof ns, BPF_ANY) == 0;
}

void Detector::set_frames_polled(bool on) {
  if (frames_) __atomic_store_n(&skel_->bss->frames_polled, on ? 1u : 0u, __ATOMIC_RELAXED);
}

int Detector::frame_sample_prog_fd() const {
  return frames_ ? bpf_program__fd(skel_->progs.jb_frame_sample) : -1;
}

}  // namespace jankbpf
