// The marker files planned for processes (not named by the user): which
// processes map each, the links attached to it and the marker ids made for
// it, so that a file is released -- links detached, ids reused -- when the
// last process that needed it is gone, and capped so that a fork/exec loop
// of fresh binaries cannot grow the probes without bound.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "markers/marker_file.h"

namespace jankbpf {

// A probe site: (kind, file, offset or provider:name, begin).
using SiteKey = std::tuple<int, std::string, std::string, bool>;

class MarkerFiles {
 public:
  // At most this many files planned for one process, and for all at once;
  // a file over either cap gets no probes (counted, said once).
  static constexpr size_t kPerProcess = 32, kTotal = 256;
  explicit MarkerFiles(size_t per_process = kPerProcess, size_t total = kTotal)
      : per_process_(per_process), total_(total) {}

  enum class Admit { Known, New, Capped };
  // Process `pid` maps file `id`: Known (planned before; pid is a user now),
  // New (room for it: pid is its first user, plan it), Capped.
  Admit admit(pid_t pid, FileId id);
  // What planning file `id` made (after admit() said New).
  void planned(FileId id, std::vector<uint32_t> marker_ids, std::vector<SiteKey> sites);
  void add_link(FileId id, uint64_t link);

  struct Released {
    FileId id;
    std::vector<uint64_t> links;
    std::vector<uint32_t> marker_ids;
    std::vector<SiteKey> sites;
  };
  // `pid` maps none of its files but `still` now (an exec; empty: it
  // exited): the files no process needs any more.
  std::vector<Released> drop(pid_t pid, const std::set<FileId>& still = {});

  bool has_user(pid_t pid) const { return by_pid_.count(pid) != 0; }
  size_t live() const { return entries_.size(); }
  size_t files_of(pid_t pid) const;
  // The files `pid` is a user of.
  std::set<FileId> used_by(pid_t pid) const;
  void refused() { refused_++; }
  uint64_t capped_count() const { return capped_; }
  uint64_t refused_count() const { return refused_; }
  // True the first time a file was capped (to say so once).
  bool take_cap_notice();

 private:
  struct Entry {
    std::set<pid_t> users;
    std::vector<uint64_t> links;
    std::vector<uint32_t> marker_ids;
    std::vector<SiteKey> sites;
  };
  size_t per_process_, total_;
  std::map<FileId, Entry> entries_;
  std::map<pid_t, std::set<FileId>> by_pid_;
  uint64_t capped_ = 0, refused_ = 0;
  bool cap_noticed_ = false;
};

}  // namespace jankbpf
