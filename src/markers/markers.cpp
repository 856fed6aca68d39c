#include "markers/markers.h"

#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "jankbpf/events.h"
#include "markers/probe_elf.h"
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
  auto key = std::make_tuple(static_cast<int>(a.kind), a.binary, where, a.begin);
  if (sites_.count(key)) return;  // one attachment per site, whoever asked first
  sites_[key] = attachments_.size();
  attachments_.push_back(std::move(a));
}

bool MarkerTable::resolve(const ProbeSpec& spec, bool begin, uint64_t cookie, ProbeAttachment* out,
                          std::string* error) {
  auto path = resolve_binary(spec.binary, error);
  if (!path) return false;
  out->kind = spec.kind;
  out->begin = begin;
  out->binary = *path;
  out->cookie = cookie;
  if (spec.kind == ProbeSpec::Kind::Usdt) {
    auto probes = sdt_probes(*path);
    if (!has_sdt_probe(probes, spec.provider, spec.name)) {
      *error = "no USDT probe " + spec.provider + ":" + spec.name + " in " + *path +
               (probes.empty() ? " (it has no .note.stapsdt)" : "");
      return false;
    }
    out->provider = spec.provider;
    out->name = spec.name;
    return true;
  }
  auto site = find_function(*path, spec.symbol, error);
  if (!site) return false;
  out->offset = site->offset;
  return true;
}

bool MarkerTable::add_pair(const ProbeSpec& begin, const ProbeSpec& end, const std::string& runtime,
                           std::string* error) {
  MarkerInfo info;
  info.id = static_cast<uint32_t>(markers_.size() + 1);
  uint64_t cookie = info.id;
  if (begin.kind == ProbeSpec::Kind::Usdt) cookie |= JB_MARKER_NAME_ARG;
  ProbeAttachment b, e;
  if (!resolve(begin, true, cookie, &b, error) || !resolve(end, false, info.id, &e, error))
    return false;
  if (b.kind == e.kind && b.binary == e.binary && b.offset == e.offset && b.provider == e.provider &&
      b.name == e.name) {
    *error = "'" + begin.to_string() + "' is both the begin and the end";
    return false;
  }
  info.type = begin.kind_name();
  info.binary = b.binary;
  info.probe = begin.probe();
  info.name = begin.kind == ProbeSpec::Kind::Usdt ? begin.name : display_symbol(begin.symbol);
  info.runtime = runtime;
  markers_.push_back(std::move(info));
  push(std::move(b));
  push(std::move(e));
  return true;
}

bool MarkerTable::add_glib(const std::string& binary, std::string* error) {
  auto path = resolve_binary(binary.empty() ? "libglib-2.0.so.0" : binary, error);
  if (!path) {
    *error = "glib: " + *error;
    return false;
  }
  // GLib's own probes where the build has them: one task per GSource
  // dispatch, named by the source. Otherwise a dispatch round per task.
  auto probes = sdt_probes(*path);
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
    if (!find_function(*path, "g_main_context_dispatch", &why)) {
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
    std::string why;
    auto path = resolve_binary(c, &why);
    if (!path) {
      reasons += (reasons.empty() ? "" : "; ") + why;
      continue;
    }
    bool here = false;
    for (const char* phase : kLibuvPhases) {
      if (!find_function(*path, phase, &why)) continue;
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

void MarkerTable::note_file(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0)
    files_.insert({static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)});
}

bool MarkerTable::plan(const std::vector<MarkerSpec>& specs, std::string* error) {
  for (const auto& s : specs) {
    std::string why;
    size_t first = attachments_.size();
    if (!plan_one(s, "", &why)) {
      *error = "--marker " + s.text + ": " + why;
      return false;
    }
    specs_.push_back(s);
    std::vector<std::string> paths;
    for (size_t i = first; i < attachments_.size(); i++) {
      note_file(attachments_[i].binary);
      paths.push_back(attachments_[i].binary);
    }
    spec_paths_.push_back(std::move(paths));
  }
  return true;
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

std::vector<ProbeAttachment> MarkerTable::plan_for_process(pid_t pid, std::vector<std::string>* notes) {
  std::vector<ProbeAttachment> fresh;
  const std::string proc = "/proc/" + std::to_string(pid);
  std::string maps_text;
  stack::read_small_file(proc + "/maps", maps_text);
  std::istringstream maps(maps_text);
  std::set<std::string> seen;
  std::string line;
  while (std::getline(maps, line)) {
    // start-end perms offset dev inode path
    std::istringstream in(line);
    std::string range, perms, offset, dev, inode, path;
    if (!(in >> range >> perms >> offset >> dev >> inode)) continue;
    std::getline(in >> std::ws, path);
    if (perms.size() < 3 || perms[2] != 'x' || path.empty() || path[0] != '/') continue;
    if (path.ends_with(" (deleted)") || !seen.insert(path).second) continue;
    std::vector<size_t> wanted;
    for (size_t i = 0; i < specs_.size(); i++)
      if (matches(specs_[i], path)) wanted.push_back(i);
    if (wanted.empty()) continue;
    const std::string file = proc + "/root" + path;
    struct stat st;
    if (stat(file.c_str(), &st) != 0) continue;
    if (!files_.insert({static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)}).second)
      continue;  // covered already, or looked at before
    for (size_t i : wanted) {
      size_t first_marker = markers_.size(), first = attachments_.size();
      std::string why;
      if (!plan_one(specs_[i], file, &why)) {
        notes->push_back("--marker " + specs_[i].text + ": pid " + std::to_string(pid) + "'s " + path +
                         ": " + why);
        continue;
      }
      // Records name the file as the process sees it.
      for (size_t m = first_marker; m < markers_.size(); m++) markers_[m].binary = path;
      for (size_t a = first; a < attachments_.size(); a++) fresh.push_back(attachments_[a]);
      notes->push_back("--marker " + specs_[i].text + ": pid " + std::to_string(pid) + " maps " + path +
                       ", a file no probe covers: attaching to it");
    }
  }
  return fresh;
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
