// The markers of a run: each --marker (or preset) resolved to the probe
// sites to attach, once per site system-wide, and the table the records
// are named from. A marker's id travels as the BPF cookie of its begin
// probe and comes back in task records.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "markers/marker_spec.h"

namespace jankbpf {

// What a task record says about the marker that bounded it.
struct MarkerInfo {
  uint32_t id = 0;
  std::string type;     // begin probe: "uprobe", "uretprobe", "usdt"
  std::string binary;   // resolved path of the binary holding it
  std::string probe;    // begin probe: SYMBOL, SYMBOL%return, PROVIDER:NAME
  std::string name;     // the runnable's name when the probe gives none
  std::string runtime;  // "glib", "libuv", or "" for a custom --marker
};

// One attach call: a probe site with the program to run there.
struct ProbeAttachment {
  ProbeSpec::Kind kind = ProbeSpec::Kind::Uprobe;
  bool begin = true;     // jb_*_begin or jb_*_end
  std::string binary;    // resolved path
  uint64_t offset = 0;   // uprobes: file offset of the function
  std::string provider, name;  // USDT
  uint64_t cookie = 0;   // marker id | JB_MARKER_* flags
  std::string describe() const;  // for messages: "uprobe /usr/bin/x:sym (begin)"
};

class MarkerTable {
 public:
  // Resolves every spec: binaries, functions, USDT notes, presets. False
  // with *error (a usage error: the user named something that is not
  // there) when one cannot be resolved.
  bool plan(const std::vector<MarkerSpec>& specs, std::string* error);

  const std::vector<ProbeAttachment>& attachments() const { return attachments_; }
  const std::vector<MarkerInfo>& markers() const { return markers_; }
  // The marker a record names, or nullptr.
  const MarkerInfo* find(uint32_t id) const;
  bool empty() const { return markers_.empty(); }

  // A process seen for the first time (or since it exec'd): the marked
  // binaries it maps that no attachment covers yet -- its own copy in a
  // container, a binary replaced on disk since, another program it exec'd
  // -- are planned as the user's specs were, through /proc/PID/root. Each
  // file is looked at once. Returns the new attachments (also kept in
  // attachments()); *notes says what was found, for the log.
  std::vector<ProbeAttachment> plan_for_process(pid_t pid, std::vector<std::string>* notes);
  // Whether `mapped` (a path as a process sees it) is the binary of spec
  // `s`: the same path, or for a name or a preset, the same file name.
  bool matches(const MarkerSpec& s, const std::string& mapped) const;

 private:
  bool add_pair(const ProbeSpec& begin, const ProbeSpec& end, const std::string& runtime,
                std::string* error);
  bool add_glib(const std::string& binary, std::string* error);
  bool add_libuv(const std::string& binary, std::string* error);
  bool resolve(const ProbeSpec& spec, bool begin, uint64_t cookie, ProbeAttachment* out,
               std::string* error);
  void push(ProbeAttachment a);

  bool plan_one(const MarkerSpec& s, const std::string& binary, std::string* error);
  void note_file(const std::string& path);

  std::vector<MarkerSpec> specs_;
  std::vector<std::vector<std::string>> spec_paths_;  // real paths each spec resolved to
  std::set<std::pair<uint64_t, uint64_t>> files_;     // (dev, ino) of files looked at
  std::vector<MarkerInfo> markers_;
  std::vector<ProbeAttachment> attachments_;
  // Sites attached already: (kind, binary, offset or provider:name, begin).
  std::map<std::tuple<int, std::string, std::string, bool>, size_t> sites_;
};

// The runnable name of a marker task: the name read at the probe when it
// is a printable string, else the marker's own name. Exposed for tests.
std::string runnable_name(const char* read, size_t max, const MarkerInfo* marker);

}  // namespace jankbpf
