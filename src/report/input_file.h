// Opening a file that untrusted input names (a record's stack log or
// trace, in `jankbpf report` or a live report) for reading, without opening
// anything that is not a regular file: the path is looked at through an
// O_PATH descriptor first (which opens no FIFO and calls no device's open),
// and only a regular file within `max_size` is then opened for reading,
// through that very descriptor (/proc/self/fd/N), so a swap of the path in
// between changes nothing.
#pragma once

#include <cstdint>
#include <string>

#include "util/safe_open.h"

namespace jankbpf::report {

Opened open_input_file(const std::string& path, uint64_t max_size);

}  // namespace jankbpf::report
