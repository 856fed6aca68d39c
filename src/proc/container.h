// Which container a process runs in, from its cgroup v2 path: container
// runtimes name the cgroup they create after the container's id.
#pragma once

#include <string>
#include <string_view>

namespace jankbpf {

// The container id a cgroup path names, or "" when it names none. The
// deepest component that names one wins. Recognized, with ID 64 hex digits:
//   /docker/ID, /system.slice/docker-ID.scope          Docker (cgroupfs, systemd)
//   .../cri-containerd-ID.scope, /k8s.io/ID, .../podUID/ID   containerd, Kubernetes
//   .../crio-ID.scope                                  CRI-O
//   .../libpod-ID.scope, /libpod_parent/libpod-ID      Podman
//   /ecs/TASK/ID, /actions_job/ID                      other runtimes' bare ids
// and by name: /lxc/NAME, /lxc.payload.NAME, machine-NAME.scope
// (systemd-nspawn). Runtimes' own helper processes (conmon,
// crio-conmon-ID.scope, libpod-conmon-ID.scope) are not containers.
std::string container_id_from_cgroup(std::string_view cgroup_path);

}  // namespace jankbpf
