// Rewriting a report file in place without a reader ever seeing half of it
// and without root writing through a planted link: a temporary file made
// with O_EXCL|O_NOFOLLOW next to it, fsync, rename over it.
#pragma once

#include <string>
#include <string_view>

namespace jankbpf::report {

// Replaces `path` with `data` atomically (mode 0640). Refuses when `path`
// is a symlink or not a regular file. False with *error saying why.
bool write_atomic(const std::string& path, std::string_view data, std::string* error);

// Whether `path` can be written so, checked before a run starts: its
// directory exists and `path` is absent or a regular file (not a symlink).
bool check_writable(const std::string& path, std::string* error);

}  // namespace jankbpf::report
