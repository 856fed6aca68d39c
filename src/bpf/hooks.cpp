#include "bpf/hooks.h"

#include "jankbpf/hooks.h"

namespace jankbpf {

std::string_view wait_name(uint32_t wait_id) {
  static constexpr std::string_view kNames[] = {
#define JB_X(name) #name,
      JB_EVENT_WAITS(JB_X) JB_CHILD_WAITS(JB_X)
#undef JB_X
  };
  static_assert(std::size(kNames) == JB_WAIT_NR);
  return wait_id < JB_WAIT_NR ? kNames[wait_id] : std::string_view{};
}

}  // namespace jankbpf
