#include "runtime/python_procs.h"

#include <sys/stat.h>

#include <charconv>
#include <string_view>

#include "stack/maps.h"
#include "stack/resolver.h"
#include "util/log.h"

namespace jankbpf::runtime {

std::unique_ptr<PythonTarget> find_python(stack::Resolver& resolver, pid_t pid, std::string* why) {
  std::unique_ptr<PythonTarget> found;
  std::string module_path;
  uint64_t version_addr = 0;
  // The executable comes first in address order, so a statically linked
  // interpreter is found without opening its libraries.
  resolver.for_each_module(pid, host_arch().arch, [&](const stack::Module& m, uint64_t bias) {
    const stack::ElfImage& elf = m.elf();
    auto runtime = elf.symbol_value("_PyRuntime");
    if (!runtime) return true;
    auto t = std::make_unique<PythonTarget>();
    t->runtime = *runtime + bias;
    if (auto v = elf.symbol_value("Py_Version")) version_addr = *v + bias;
    if (auto v = elf.symbol_value("PyCode_Type")) t->code_type = *v + bias;
    if (auto v = elf.symbol_value("PyUnicode_Type")) t->unicode_type = *v + bias;
    if (auto v = elf.symbol_value("PyBytes_Type")) t->bytes_type = *v + bias;
    module_path = m.path();
    found = std::move(t);
    return false;
  });
  if (!found) {
    if (why) why->clear();
    return nullptr;
  }
  // Py_Version is `const unsigned long` (PY_VERSION_HEX), new in 3.11.
  ProcessMemory mem(pid);
  if (!version_addr) {
    if (why) *why = module_path + " has _PyRuntime but no Py_Version: CPython older than 3.11";
    return nullptr;
  }
  if (!mem.read_value(version_addr, &found->version_hex)) {
    if (why) *why = module_path + ": Py_Version unreadable";
    return nullptr;
  }
  found->layout = python_layout(found->version_hex);
  if (!found->layout) {
    if (why)
      *why = module_path + ": CPython " + python_version_text(found->version_hex) + " (frames are read for " +
             python_supported_versions() + ")";
    return nullptr;
  }
  if (why) *why = module_path + ": CPython " + python_version_text(found->version_hex);
  return found;
}

void PythonProcesses::discover(stack::Resolver& resolver, pid_t pid) {
  // stat() follows /proc/PID/exe to the file: its identity, nothing opened.
  struct stat st {};
  if (stat(("/proc/" + std::to_string(pid) + "/exe").c_str(), &st) != 0) return;
  {
    std::lock_guard lk(mu_);
    auto it = known_.find(pid);
    if (it != known_.end() && it->second.exe_dev == st.st_dev && it->second.exe_ino == st.st_ino) return;
  }
  // (for_each_module re-reads the maps: after an exec, the new image's.)
  std::string why;
  std::shared_ptr<const PythonTarget> t = find_python(resolver, pid, &why);
  if (t) log::info("pid %d: %s: reading Python frames", pid, log::escape_control(why).c_str());
  else if (!why.empty()) log::info("pid %d: %s: Python frames not read", pid, log::escape_control(why).c_str());
  std::lock_guard lk(mu_);
  if (known_.size() >= 4096) known_.clear();
  known_[pid] = Known{std::move(t), st.st_dev, st.st_ino};
}

bool PythonProcesses::is_python(pid_t pid) {
  std::lock_guard lk(mu_);
  auto it = known_.find(pid);
  return it != known_.end() && it->second.target;
}

void PythonProcesses::forget(pid_t pid) {
  std::lock_guard lk(mu_);
  known_.erase(pid);
}

uint64_t PythonProcesses::ns_tid(pid_t pid, pid_t tid) {
  std::string text;
  if (!stack::read_small_file("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/status", text,
                              64 << 10))
    return static_cast<uint64_t>(tid);
  size_t at = text.find("\nNSpid:");
  if (at == std::string::npos) return static_cast<uint64_t>(tid);
  std::string_view line(text);
  line.remove_prefix(at + 7);
  line = line.substr(0, line.find('\n'));
  uint64_t last = static_cast<uint64_t>(tid);
  // "NSpid:\t123\t7": the last number is the innermost namespace's.
  while (!line.empty()) {
    size_t s = line.find_first_not_of(" \t");
    if (s == std::string_view::npos) break;
    line.remove_prefix(s);
    uint64_t v = 0;
    auto r = std::from_chars(line.data(), line.data() + line.size(), v);
    if (r.ec != std::errc()) break;
    last = v;
    line.remove_prefix(static_cast<size_t>(r.ptr - line.data()));
  }
  return last;
}

PyCapture PythonProcesses::capture(pid_t pid, pid_t tid) {
  std::shared_ptr<const PythonTarget> target;
  {
    std::lock_guard lk(mu_);
    auto it = known_.find(pid);
    if (it != known_.end()) target = it->second.target;
  }
  if (!target) {
    live_.erase(pid);
    return {};
  }
  auto& live = live_[pid];
  if (live.target != target) {  // first sample, or the process was looked at anew
    live.target = target;
    live.walker = std::make_unique<PythonWalker>(*target);
    live.ns_tids.clear();
  }
  auto nt = live.ns_tids.find(tid);
  if (nt == live.ns_tids.end()) {
    if (live.ns_tids.size() >= 4096) live.ns_tids.clear();
    nt = live.ns_tids.emplace(tid, ns_tid(pid, tid)).first;
  }
  ProcessMemory mem(pid);
  PyCapture c = live.walker->walk(mem, nt->second);
  if (live_.size() > 4096) live_.clear();  // processes gone without an exit record
  return c;
}

}  // namespace jankbpf::runtime
