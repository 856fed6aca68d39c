// Detector, the causes `fault` and `io` side (bpf/causes_io.bpf.h): their
// raw tracepoints, attached one by one as the kernel has them. A kernel
// without exceptions:page_fault_user (every arch but x86) still tells a
// fault from its D-state sleep outside a syscall, without the address; one
// without the block tracepoints still tells I/O from a D-state sleep in a
// file I/O syscall, without the requests. Each is said in the features.
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "bpf/detector.h"
#include "bpf/features.h"
#include "bpf/libbpf_log.h"
#include "bpf/program_select.h"
#include "jank.skel.h"

namespace jankbpf {

void configure_io(jank_bpf* skel, bool causes) {
  for (auto* p : {skel->progs.jb_fault_user, skel->progs.jb_rq_issue, skel->progs.jb_rq_complete}) {
    bpf_program__set_autoload(p, causes);
    bpf_program__set_autoattach(p, false);
  }
  if (!causes)
    for (auto* m : {skel->maps.io_threads, skel->maps.io_rqs}) bpf_map__set_max_entries(m, 1);
}

// Attaching is the probe: a raw tracepoint the kernel lacks is refused here.
void Detector::attach_io_hooks(FeatureSet* features) {
  if (!causes_) return;
  auto attach = [this](bpf_program* prog, const char* feature, const char* tp, std::string* why) {
    if (disabled_by_env(feature)) {
      *why = "disabled by JANKBPF_DISABLE";
      return false;
    }
    clear_libbpf_log();
    bpf_link* link = bpf_program__attach_raw_tracepoint(prog, tp);
    if (!link) {
      const int err = errno;
      const std::string line = last_libbpf_line();
      *why = std::string("raw tracepoint ") + tp + ": " + strerror(err) + (line.empty() ? "" : " (" + line + ")");
      return false;
    }
    keep_extra(link, false);  // a raw tracepoint: quick to detach
    return true;
  };
  std::string why;
  const bool fault = attach(skel_->progs.jb_fault_user, "fault_address", "page_fault_user", &why);
  features->set("fault_address", fault,
                fault ? "exceptions:page_fault_user: the faulting address of a major fault" : why,
                fault ? "" : "a major fault is told by its D-state sleep outside a syscall, without its address or file");
  why.clear();
  bool block = attach(skel_->progs.jb_rq_issue, "block_requests", "block_rq_issue", &why);
  if (block) block = attach(skel_->progs.jb_rq_complete, "block_requests", "block_rq_complete", &why);
  features->set("block_requests", block,
                block ? "block:block_rq_issue/complete: a thread's own requests, device, bytes, latency" : why,
                block ? "" : "block I/O is told by a D-state sleep in a file I/O syscall, without device latency");
}

}  // namespace jankbpf
