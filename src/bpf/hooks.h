// The waits jankbpf hooks, from the one table both sides share
// (include/jankbpf/hooks.h).
#pragma once

#include <cstdint>
#include <string_view>

namespace jankbpf {

// The name of a jb_wait_id ("epoll_wait"), or "" for an id outside the table.
std::string_view wait_name(uint32_t wait_id);

}  // namespace jankbpf
