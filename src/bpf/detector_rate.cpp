// Detector, --record-rate and --record-rate-uid: what each process's and
// uid's bucket refused (bpf/record_rate.bpf.h), for the records, the
// summary and the metrics.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/detector.h"
#include "jank.skel.h"
#include "jankbpf/rate.h"

namespace jankbpf {

uint64_t Detector::records_rate_limited(pid_t pid, bool forget) {
  if (!skel_) return 0;
  const int fd = bpf_map__fd(skel_->maps.record_bucket);
  const uint32_t key = static_cast<uint32_t>(pid);
  jb_record_bucket b{};
  if (bpf_map_lookup_elem(fd, &key, &b) != 0) return 0;
  if (forget) bpf_map_delete_elem(fd, &key);  // a pid reused later starts at zero
  return b.limited;
}

std::vector<std::pair<uint32_t, uint64_t>> Detector::records_rate_limited_all(bool by_uid) const {
  std::vector<std::pair<uint32_t, uint64_t>> out;
  if (!skel_) return out;
  const int fd = bpf_map__fd(by_uid ? skel_->maps.uid_bucket : skel_->maps.record_bucket);
  uint32_t key = 0, next = 0;
  const void* prev = nullptr;
  for (int guard = 0; guard < 65536 && bpf_map_get_next_key(fd, prev, &next) == 0; ++guard) {
    jb_record_bucket b{};
    if (bpf_map_lookup_elem(fd, &next, &b) == 0 && b.limited) out.emplace_back(next, b.limited);
    key = next;
    prev = &key;
  }
  return out;
}

}  // namespace jankbpf
