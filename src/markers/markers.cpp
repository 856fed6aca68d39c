#include "markers/markers.h"

#include <signal.h>

#include <cstring>

#include "jankbpf/events.h"
#include "markers/probe_elf.h"
#include "stack/elf_image.h"
#include "stack/maps.h"

namespace jankbpf {
namespace {

// libuv's loop phases that run callbacks, each a task of its own; I/O
// callbacks run inside uv__io_poll after epoll_wait returns, so the wait
// rule already bounds them. Local symbols: they need a .symtab (Node's
// binary has one; a stripped libuv.so.1 does not).
constexpr const char* kLibuvPhases[] = {"uv__run_timers", "uv__run_pending", "uv__run_idle",
                                        "uv__run_prepare", "uv__run_check",
                                        "uv__run_closing_handles"};

}  // namespace

std::string ProbeAttachment::describe() const {
  std::string what = kind == ProbeSpec::Kind::Usdt ? "usdt " + binary + ":" + provider + ":" + name
                     : std::string(kind == ProbeSpec::Kind::Uretprobe ? "uretprobe " : "uprobe ") +
                           binary + "+0x" + [&] {
                             char buf[32];
                             snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(offset));
                             return std::string(buf);
                           }();
  return what + (begin ? " (begin)" : " (end)");
}

const MarkerInfo* MarkerTable::find(uint32_t id) const {
  if (id == 0 || id > markers_.size()) return nullptr;
  return &markers_[id - 1];
}

void MarkerTable::push(ProbeAttachment a) {
  std::string where = a.kind == ProbeSpec::Kind::Usdt ? a.provider + ":" + a.name
                                                      : std::to_string(a.offset);
  // A site is in a file, whatever name it was reached by.
  std::string file = a.file ? std::to_string(a.file_id.dev) + ":" + std::to_string(a.file_id.ino) : a.binary;
  SiteKey key{static_cast<int>(a.kind), file, where, a.begin};
  if (!sites_.insert(key).second) return;  // one attachment per site, whoever asked first
  if (new_sites_) new_sites_->push_back(key);
  sink_->push_back(std::move(a));
}

uint32_t MarkerTable::new_marker_id() {
  uint32_t id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    markers_.emplace_back();
    id = static_cast<uint32_t>(markers_.size());
  }
  if (new_ids_) new_ids_->push_back(id);
  return id;
}

// Each binary is opened and parsed once per plan, and every site in it is
// attached through that descriptor (marker_file.h): what was parsed is
// what the probes land in.
const MarkerTable::OpenBinary* MarkerTable::open_binary(const std::string& name, std::string* path,
                                                        std::string* error) {
  if (auto it = open_.find(name); it != open_.end()) {
    *path = name;
    return &it->second;
  }
  auto real = resolve_binary(name, error);
  if (!real) return nullptr;
  *path = *real;
  if (auto it = open_.find(*real); it != open_.end()) return &it->second;
  std::string why;
  auto file = open_marker_path(*real, &why);
  if (!file) {
    *error = why;
    return nullptr;
  }
  std::shared_ptr<stack::ElfImage> image = file->parse();
  if (!image) {
    *error = "'" + *real + "' is not a readable 64-bit ELF file";
    return nullptr;
  }
  return &open_.emplace(*real, OpenBinary{std::move(file), std::move(image)}).first->second;
}

bool MarkerTable::resolve(const ProbeSpec& spec, bool begin, uint64_t cookie, ProbeAttachment* out,
                          std::string* error) {
  std::string path;
  const OpenBinary* bin = open_binary(spec.binary, &path, error);
  if (!bin) return false;
  out->kind = spec.kind;
  out->begin = begin;
  out->binary = path;
  out->file = bin->file;
  out->file_id = bin->file->id();
  out->cookie = cookie;
  if (spec.kind == ProbeSpec::Kind::Usdt) {
    auto probes = sdt_probes(bin->image->elf());
    if (!has_sdt_probe(probes, spec.provider, spec.name)) {
      *error = "no USDT probe " + spec.provider + ":" + spec.name + " in " + path +
               (probes.empty() ? " (it has no .note.stapsdt)" : "");
      return false;
    }
    out->provider = spec.provider;
    out->name = spec.name;
    return true;
  }
  auto site = find_function(*bin->image, path, spec.symbol, error);
  if (!site) return false;
  out->offset = site->offset;
  return true;
}

bool MarkerTable::add_pair(const ProbeSpec& begin, const ProbeSpec& end, const std::string& runtime,
                           std::string* error) {
  MarkerInfo info;
  ProbeAttachment b, e;
  if (!resolve(begin, true, 0, &b, error) || !resolve(end, false, 0, &e, error)) return false;
  if (b.kind == e.kind && b.binary == e.binary && b.offset == e.offset && b.provider == e.provider &&
      b.name == e.name) {
    *error = "'" + begin.to_string() + "' is both the begin and the end";
    return false;
  }
  info.id = new_marker_id();
  b.cookie = info.id | (begin.kind == ProbeSpec::Kind::Usdt ? JB_MARKER_NAME_ARG : 0);
  e.cookie = info.id;
  info.type = begin.kind_name();
  info.binary = b.binary;
  info.probe = begin.probe();
  info.name = begin.kind == ProbeSpec::Kind::Usdt ? begin.name : display_symbol(begin.symbol);
  info.runtime = runtime;
  markers_[info.id - 1] = std::move(info);
  push(std::move(b));
  push(std::move(e));
  return true;
}

bool MarkerTable::add_glib(const std::string& binary, std::string* error) {
  std::string resolved;
  const OpenBinary* bin = open_binary(binary.empty() ? "libglib-2.0.so.0" : binary, &resolved, error);
  if (!bin) {
    *error = "glib: " + *error;
    return false;
  }
  const std::string* path = &resolved;
  // GLib's own probes where the build has them: one task per GSource
  // dispatch, named by the source. Otherwise a dispatch round per task.
  auto probes = sdt_probes(bin->image->elf());
  ProbeSpec begin, end;
  begin.binary = end.binary = *path;
  if (has_sdt_probe(probes, "glib", "main__before_dispatch") &&
      has_sdt_probe(probes, "glib", "main__after_dispatch")) {
    begin.kind = end.kind = ProbeSpec::Kind::Usdt;
    begin.provider = end.provider = "glib";
    begin.name = "main__before_dispatch";
    end.name = "main__after_dispatch";
  } else {
    std::string why;
    if (!find_function(*bin->image, *path, "g_main_context_dispatch", &why)) {
      *error = "glib: " + *path + " has neither the glib:main__before_dispatch USDT probes nor " + why;
      return false;
    }
    begin.kind = ProbeSpec::Kind::Uprobe;
    end.kind = ProbeSpec::Kind::Uretprobe;
    begin.symbol = end.symbol = "g_main_context_dispatch";
  }
  return add_pair(begin, end, "glib", error);
}

bool MarkerTable::add_libuv(const std::string& binary, std::string* error) {
  std::vector<std::string> candidates;
  if (binary.empty()) candidates = {"node", "libuv.so.1"};
  else candidates = {binary};
  std::string reasons;
  bool any = false;
  for (const auto& c : candidates) {
    std::string why, resolved;
    const OpenBinary* bin = open_binary(c, &resolved, &why);
    if (!bin) {
      reasons += (reasons.empty() ? "" : "; ") + why;
      continue;
    }
    const std::string* path = &resolved;
    bool here = false;
    for (const char* phase : kLibuvPhases) {
      if (!find_function(*bin->image, *path, phase, &why)) continue;
      ProbeSpec begin, end;
      begin.binary = end.binary = *path;
      begin.kind = ProbeSpec::Kind::Uprobe;
      end.kind = ProbeSpec::Kind::Uretprobe;
      begin.symbol = end.symbol = phase;
      if (!add_pair(begin, end, "libuv", error)) return false;
      here = true;
    }
    if (!here)
      reasons += (reasons.empty() ? "" : "; ") + *path +
                 ": no libuv loop phases (uv__run_timers...) in its symbols (stripped?)";
    any = any || here;
  }
  if (!any) {
    *error = "libuv: " + reasons;
    return false;
  }
  return true;
}

bool MarkerTable::plan_one(const MarkerSpec& s, const std::string& binary, std::string* error) {
  switch (s.preset) {
    case MarkerSpec::Preset::None: {
      if (binary.empty()) return add_pair(s.begin, s.end, "", error);
      ProbeSpec b = s.begin, e = s.end;
      b.binary = e.binary = binary;
      return add_pair(b, e, "", error);
    }
    case MarkerSpec::Preset::Glib: return add_glib(binary.empty() ? s.preset_binary : binary, error);
    case MarkerSpec::Preset::Libuv: return add_libuv(binary.empty() ? s.preset_binary : binary, error);
  }
  return false;
}

bool MarkerTable::plan(const std::vector<MarkerSpec>& specs, std::string* error) {
  for (const auto& s : specs) {
    std::string why;
    size_t first = attachments_.size();
    if (!plan_one(s, "", &why)) {
      open_.clear();
      *error = "--marker " + s.text + ": " + why;
      return false;
    }
    specs_.push_back(s);
    std::vector<std::string> paths;
    for (size_t i = first; i < attachments_.size(); i++) {
      user_files_.insert(attachments_[i].file_id);
      paths.push_back(attachments_[i].binary);
    }
    spec_paths_.push_back(std::move(paths));
  }
  open_.clear();  // the parses; the descriptors stay with attachments_
  return true;
}

void MarkerTable::drop_files() {
  for (auto& a : attachments_) a.file.reset();
}

namespace {
std::string_view base_name(std::string_view p) {
  auto slash = p.rfind('/');
  return slash == std::string_view::npos ? p : p.substr(slash + 1);
}
}  // namespace

bool MarkerTable::matches(const MarkerSpec& s, const std::string& mapped) const {
  std::string_view base = base_name(mapped);
  // The file the spec resolved to here, under the same path there.
  const std::vector<std::string>* resolved = nullptr;
  for (size_t i = 0; i < specs_.size(); i++)
    if (&specs_[i] == &s) resolved = &spec_paths_[i];
  auto named = [&](const std::string& given) {
    if (given.empty()) return false;
    if (given.find('/') == std::string::npos)  // a name: the same file name
      return base == given || base.starts_with(given + ".");
    if (mapped == given) return true;
    if (resolved)
      for (const auto& r : *resolved)
        if (mapped == r) return true;
    return false;
  };
  switch (s.preset) {
    case MarkerSpec::Preset::None:
      // One binary for both ends: a pair spread over two is not re-planned.
      return s.begin.binary == s.end.binary && named(s.begin.binary);
    case MarkerSpec::Preset::Glib:
      if (!s.preset_binary.empty()) return named(s.preset_binary);
      return base.starts_with("libglib-2.0.so");
    case MarkerSpec::Preset::Libuv:
      if (!s.preset_binary.empty()) return named(s.preset_binary);
      return base == "node" || base.starts_with("libuv.so");
  }
  return false;
}

ProcessPlan MarkerTable::plan_for_process(pid_t pid, std::vector<std::string>* notes) {
  ProcessPlan out;
  const std::string proc = "/proc/" + std::to_string(pid);
  std::string maps_text;
  stack::read_small_file(proc + "/maps", maps_text);
  const auto maps = stack::ProcMaps::parse(maps_text);
  std::set<std::string> seen;
  std::set<FileId> now;  // the planned files it maps
  const std::string who = "pid " + std::to_string(pid);
  for (const auto& m : maps.entries()) {
    if (!m.x || m.deleted || m.path.empty() || m.path[0] != '/' || !seen.insert(m.path).second) continue;
    std::vector<size_t> wanted;
    for (size_t i = 0; i < specs_.size(); i++)
      if (matches(specs_[i], m.path)) wanted.push_back(i);
    if (wanted.empty()) continue;
    std::string why;
    auto file = open_mapped_marker_file(pid, m, &why);
    if (!file) {
      if (kill(pid, 0) == 0) {  // not merely gone
        files_.refused();
        notes->push_back("marker file refused: " + why);
      }
      continue;
    }
    if (user_files_.count(file->id())) continue;  // the user's own probes cover it
    auto admitted = files_.admit(pid, file->id());
    if (admitted == MarkerFiles::Admit::Capped) {
      notes->push_back(who + "'s " + m.path + ": over the marker file caps, no probes");
      continue;
    }
    now.insert(file->id());
    if (admitted == MarkerFiles::Admit::Known) continue;  // planned already
    // Messages name it as before; the planned sites carry the descriptor.
    const std::string key = proc + "/root" + m.path;
    std::shared_ptr<stack::ElfImage> image = file->parse();
    if (!image) {
      notes->push_back(who + "'s " + m.path + ": not a readable 64-bit ELF file");
      continue;
    }
    open_[key] = OpenBinary{file, std::move(image)};
    std::vector<uint32_t> ids;
    std::vector<SiteKey> sites;
    new_ids_ = &ids;
    new_sites_ = &sites;
    sink_ = &out.attach;
    for (size_t i : wanted) {
      size_t first_id = ids.size(), first = out.attach.size();
      if (!plan_one(specs_[i], key, &why)) {
        notes->push_back("--marker " + specs_[i].text + ": " + who + "'s " + m.path + ": " + why);
        continue;
      }
      // Records name the file as the process sees it.
      for (size_t k = first_id; k < ids.size(); k++) markers_[ids[k] - 1].binary = m.path;
      if (out.attach.size() > first)
        notes->push_back("--marker " + specs_[i].text + ": " + who + " maps " + m.path +
                         ", a file no probe covers: attaching to it");
    }
    new_ids_ = nullptr;
    new_sites_ = nullptr;
    sink_ = &attachments_;
    open_.clear();
    files_.planned(file->id(), std::move(ids), std::move(sites));
  }
  // An exec: the files it no longer maps, by inode (a file renamed or
  // deleted since is still mapped under another name).
  std::set<uint64_t> inodes;
  for (const auto& m : maps.entries())
    if (m.x) inodes.insert(m.inode);
  for (const FileId& f : files_.used_by(pid))
    if (inodes.count(f.ino)) now.insert(f);
  if (!maps.empty()) forget_released(files_.drop(pid, now), &out.release);
  out.watch_exit = files_.has_user(pid);
  return out;
}

std::vector<uint64_t> MarkerTable::process_gone(pid_t pid) {
  std::vector<uint64_t> links;
  forget_released(files_.drop(pid), &links);
  return links;
}

void MarkerTable::forget_released(const std::vector<MarkerFiles::Released>& gone,
                                  std::vector<uint64_t>* links) {
  for (const auto& r : gone) {
    links->insert(links->end(), r.links.begin(), r.links.end());
    for (uint32_t id : r.marker_ids) free_ids_.push_back(id);
    for (const auto& s : r.sites) sites_.erase(s);
  }
}

std::string runnable_name(const char* read, size_t max, const MarkerInfo* marker) {
  std::string s(read, strnlen(read, max));
  bool printable = !s.empty();
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) printable = false;
  if (printable) return s;
  return marker ? marker->name : "";
}

}  // namespace jankbpf
