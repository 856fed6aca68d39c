#include "proc/container.h"

#include <vector>

namespace jankbpf {
namespace {

bool is_hex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool strip_prefix(std::string_view& s, std::string_view prefix) {
  if (!s.starts_with(prefix)) return false;
  s.remove_prefix(prefix.size());
  return true;
}

bool strip_suffix(std::string_view& s, std::string_view suffix) {
  if (!s.ends_with(suffix)) return false;
  s.remove_suffix(suffix.size());
  return true;
}

// A name LXC or systemd-nspawn gave a container: printable, no slashes.
bool plausible_name(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s)
    if (static_cast<unsigned char>(c) <= ' ' || c == '/' || c == 0x7f) return false;
  return true;
}

// The id one path component names, or "".
std::string id_of_component(std::string_view c, std::string_view parent) {
  if (is_hex64(c)) return std::string(c);
  std::string_view s = c;
  // systemd scopes: <runtime>-<id>.scope; a runtime's conmon is not a container.
  if (strip_suffix(s, ".scope")) {
    if (s.find("conmon") != std::string_view::npos) return "";
    for (std::string_view prefix : {"docker-", "cri-containerd-", "crio-", "libpod-",
                                    "containerd-", "cri-o-", "podman-"}) {
      std::string_view id = s;
      if (strip_prefix(id, prefix) && is_hex64(id)) return std::string(id);
    }
    std::string_view name = s;
    // systemd-nspawn / machined: machine-NAME.scope (the name is \x2d-escaped).
    if (strip_prefix(name, "machine-") && plausible_name(name)) return std::string(name);
    return "";
  }
  // Podman's cgroupfs manager: /libpod_parent/libpod-ID
  std::string_view id = s;
  if (strip_prefix(id, "libpod-") && is_hex64(id)) return std::string(id);
  // LXC 4+: lxc.payload.NAME; older LXC: /lxc/NAME.
  std::string_view name = s;
  if (strip_prefix(name, "lxc.payload.") && plausible_name(name)) return std::string(name);
  if (parent == "lxc" && plausible_name(s)) return std::string(s);
  return "";
}

}  // namespace

std::string container_id_from_cgroup(std::string_view path) {
  std::vector<std::string_view> parts;
  while (!path.empty()) {
    auto slash = path.find('/');
    std::string_view part = path.substr(0, slash);
    if (!part.empty()) parts.push_back(part);
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  // Deepest first: a container nested in a pod (or in another container)
  // is the one the process runs in.
  for (size_t i = parts.size(); i-- > 0;) {
    std::string id = id_of_component(parts[i], i ? parts[i - 1] : std::string_view());
    if (!id.empty()) return id;
  }
  return "";
}

}  // namespace jankbpf
