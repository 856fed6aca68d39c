// The sampled thread in the JVM (hotspot_frames.h): its JavaThread, by
// kernel tid, from the thread list; the JVM's state at the read, for its
// own pauses.
#include <algorithm>
#include <vector>

#include "runtime/hotspot_walk.h"

namespace jankbpf::runtime {

using hotspot_detail::get;

bool HotSpotWalker::find_thread(MemReader& mem, uint64_t tid, uint64_t* thread) {
  auto check = [&](uint64_t t) {
    uint64_t os = 0;
    int32_t id = 0;
    return mem.read_value(t + l_.thread_osthread, &os) && os && mem.read_value(os + l_.osthread_tid, &id) &&
           static_cast<uint64_t>(id) == tid;
  };
  auto it = threads_.find(tid);
  if (it != threads_.end() && check(it->second)) {
    *thread = it->second;
    return true;
  }
  // The current thread list (ThreadsSMRSupport): every JavaThread, its
  // OSThread and that one's kernel tid, three batched reads.
  uint64_t list = 0;
  if (!mem.read_value(l_.java_thread_list, &list) || !list) return false;
  std::vector<uint8_t> lh(std::max(l_.list_length, l_.list_threads) + 8);
  if (!mem.read(list, lh.data(), lh.size())) return false;
  uint32_t n = get<uint32_t>(lh, l_.list_length);
  uint64_t arr = get<uint64_t>(lh, l_.list_threads);
  if (n == 0 || n > kMaxJavaThreads || !arr) return false;
  std::vector<uint64_t> ts(n), os(n, 0);
  std::vector<int32_t> ids(n, -1);
  if (!mem.read(arr, ts.data(), n * 8ull)) return false;
  std::vector<MemReader::Op> ops;
  for (uint32_t i = 0; i < n; ++i) ops.push_back({ts[i] + l_.thread_osthread, &os[i], 8});
  mem.read_batch(ops);
  ops.clear();
  for (uint32_t i = 0; i < n; ++i)
    if (os[i]) ops.push_back({os[i] + l_.osthread_tid, &ids[i], 4});
  mem.read_batch(ops);
  if (threads_.size() > kMaxJavaThreads) threads_.clear();
  bool found = false;
  for (uint32_t i = 0; i < n; ++i) {
    if (ids[i] <= 0) continue;
    threads_[static_cast<uint64_t>(ids[i])] = ts[i];
    if (static_cast<uint64_t>(ids[i]) == tid) *thread = ts[i], found = true;
  }
  return found;
}

void HotSpotWalker::read_jvm_state(MemReader& mem, uint64_t thread, JvmState& st) {
  int32_t state = -1, sp_state = 0;
  uint64_t op = 0;
  std::vector<MemReader::Op> ops{{thread + l_.thread_state, &state, 4}};
  if (syms_.safepoint_state) ops.push_back({syms_.safepoint_state, &sp_state, 4});
  if (syms_.cur_vm_operation) ops.push_back({syms_.cur_vm_operation, &op, 8});
  mem.read_batch(ops);
  if (!ops[0].ok) return;
  st.known = true;
  st.thread_state = state;
  st.blocked = state == l_.state_blocked || state == l_.state_blocked_trans;
  // SafepointSynchronize's states: 0 not synchronized, 1 synchronizing, 2 synchronized.
  st.safepoint = syms_.safepoint_state && ops[1].ok && (sp_state == 1 || sp_state == 2);
  if (!syms_.cur_vm_operation || !ops.back().ok) op = 0;
  if (op && !syms_.vm_op_vtables.empty()) {
    uint64_t vptr = 0;
    if (mem.read_value(op, &vptr)) {
      // The object's vptr points 16 bytes into its class's vtable (Itanium C++ ABI).
      auto it = std::upper_bound(syms_.vm_op_vtables.begin(), syms_.vm_op_vtables.end(),
                                 std::make_pair(vptr, std::string()),
                                 [](const auto& a, const auto& b) { return a.first < b.first; });
      if (it != syms_.vm_op_vtables.begin()) {
        --it;
        if (vptr - it->first == 16) st.operation = it->second;
      }
    }
  }
}

}  // namespace jankbpf::runtime
