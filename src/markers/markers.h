// The markers of a run: each --marker (or preset) resolved to the probe
// sites to attach, once per site system-wide, and the table the records
// are named from. A marker's id travels as the BPF cookie of its begin
// probe and comes back in task records.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "model/marker_info.h"
#include "markers/marker_file.h"
#include "markers/marker_files.h"
#include "markers/marker_spec.h"

namespace jankbpf {

// One attach call: a probe site with the program to run there.
struct ProbeAttachment {
  ProbeSpec::Kind kind = ProbeSpec::Kind::Uprobe;
  bool begin = true;     // jb_*_begin or jb_*_end
  std::string binary;    // resolved path (as shown)
  uint64_t offset = 0;   // uprobes: file offset of the function
  std::string provider, name;  // USDT
  uint64_t cookie = 0;   // marker id | JB_MARKER_* flags
  // The descriptor the offsets were parsed from, attached through (dropped
  // once attached: drop_files()); its identity stays for the bookkeeping.
  std::shared_ptr<const MarkerFile> file;
  FileId file_id;
  // What libbpf and the kernel are given: /proc/self/fd/N of `file`.
  std::string attach_path() const { return file ? file->attach_path() : binary; }
  std::string describe() const;  // for messages: "uprobe /usr/bin/x:sym (begin)"
};

// What plan_for_process found for one process.
struct ProcessPlan {
  std::vector<ProbeAttachment> attach;  // new sites: attach, then add_link()
  std::vector<uint64_t> release;        // links no process needs any more
  bool watch_exit = false;  // it uses files planned for processes: call process_gone() at exit
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
  // -- are planned as the user's specs were, each opened once (see
  // marker_file.h) and looked at once while a process maps it, within the
  // caps of MarkerFiles. *notes says what was found, for the log.
  ProcessPlan plan_for_process(pid_t pid, std::vector<std::string>* notes);
  // The link attached for a planned site (its file's, released with it).
  void add_link(const ProbeAttachment& a, uint64_t link) { files_.add_link(a.file_id, link); }
  // A process gone: the links of files only it needed, to detach.
  std::vector<uint64_t> process_gone(pid_t pid);
  // Closes the descriptors of attachments() once they are attached.
  void drop_files();
  const MarkerFiles& files() const { return files_; }
  MarkerFiles& files() { return files_; }
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
  // A binary named by a spec, opened and parsed once per plan.
  struct OpenBinary {
    std::shared_ptr<MarkerFile> file;
    std::shared_ptr<stack::ElfImage> image;
  };
  const OpenBinary* open_binary(const std::string& name, std::string* path, std::string* error);
  void forget_released(const std::vector<MarkerFiles::Released>& gone, std::vector<uint64_t>* links);
  uint32_t new_marker_id();

  std::vector<MarkerSpec> specs_;
  std::vector<std::vector<std::string>> spec_paths_;  // real paths each spec resolved to
  std::set<FileId> user_files_;                       // files the user's specs resolved to
  std::map<std::string, OpenBinary> open_;            // during one plan: name -> file
  std::vector<MarkerInfo> markers_;
  std::vector<uint32_t> free_ids_;                    // of markers of released files
  std::vector<uint32_t>* new_ids_ = nullptr;          // during one file's plan: ids made
  std::vector<ProbeAttachment> attachments_;          // the user's specs' sites
  std::vector<ProbeAttachment>* sink_ = &attachments_;  // where push() puts a site
  // Sites attached already: (kind, file, offset or provider:name, begin).
  using SiteKey = std::tuple<int, std::string, std::string, bool>;
  std::set<SiteKey> sites_;
  std::vector<SiteKey>* new_sites_ = nullptr;
  MarkerFiles files_;
};

// The runnable name of a marker task: the name read at the probe when it
// is a printable string, else the marker's own name. Exposed for tests.
std::string runnable_name(const char* read, size_t max, const MarkerInfo* marker);

}  // namespace jankbpf
