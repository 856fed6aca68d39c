// Unit tests for container ids named by cgroup v2 paths.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "model/records.h"
#include "output/output.h"
#include "proc/container.h"

using namespace jankbpf;

namespace {
const std::string kId = "3f1c7e9a0b2d4c6e8f0a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f506";
const std::string kPod = "0a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5061728394a5b6c7d8e9f";
}  // namespace

TEST_CASE("container ids of the common runtimes", "[container]") {
  // Docker, cgroupfs and systemd drivers.
  CHECK(container_id_from_cgroup("/docker/" + kId) == kId);
  CHECK(container_id_from_cgroup("/system.slice/docker-" + kId + ".scope") == kId);
  // Processes in a nested cgroup of the container (systemd inside it).
  CHECK(container_id_from_cgroup("/system.slice/docker-" + kId + ".scope/init.scope") == kId);
  // containerd / Kubernetes, systemd driver.
  CHECK(container_id_from_cgroup(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_5678.slice/"
            "cri-containerd-" + kId + ".scope") == kId);
  // Kubernetes, cgroupfs driver: the container inside its pod.
  CHECK(container_id_from_cgroup("/kubepods/besteffort/pod1234-5678/" + kId) == kId);
  // containerd without systemd (its namespace as the parent).
  CHECK(container_id_from_cgroup("/k8s.io/" + kId) == kId);
  // CRI-O.
  CHECK(container_id_from_cgroup("/kubepods.slice/kubepods-pod1.slice/crio-" + kId + ".scope") == kId);
  // Podman: systemd, rootless (under the user's manager) and cgroupfs.
  CHECK(container_id_from_cgroup("/machine.slice/libpod-" + kId + ".scope") == kId);
  CHECK(container_id_from_cgroup("/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" +
                                 kId + ".scope/container") == kId);
  CHECK(container_id_from_cgroup("/libpod_parent/libpod-" + kId) == kId);
  // ECS: the task, then the container.
  CHECK(container_id_from_cgroup("/ecs/5a0d5ceddf6c44a1928d367a53f5f3d5/" + kId) == kId);
}

TEST_CASE("the deepest id wins: a container in a pod, a container in a container", "[container]") {
  CHECK(container_id_from_cgroup("/docker/" + kPod + "/docker/" + kId) == kId);
  CHECK(container_id_from_cgroup("/kubepods/pod1/" + kPod + "/" + kId) == kId);
}

TEST_CASE("named containers: LXC and systemd-nspawn", "[container]") {
  CHECK(container_id_from_cgroup("/lxc.payload.web1") == "web1");
  CHECK(container_id_from_cgroup("/lxc.payload.web1/system.slice/nginx.service") == "web1");
  CHECK(container_id_from_cgroup("/lxc/db") == "db");
  CHECK(container_id_from_cgroup("/machine.slice/machine-fedora\\x2d39.scope") == "fedora\\x2d39");
}

TEST_CASE("paths that name no container", "[container]") {
  CHECK(container_id_from_cgroup("") == "");
  CHECK(container_id_from_cgroup("/") == "");
  CHECK(container_id_from_cgroup("/system.slice/redis-server.service") == "");
  CHECK(container_id_from_cgroup("/user.slice/user-1000.slice/session-3.scope") == "");
  CHECK(container_id_from_cgroup("/init.scope") == "");
  // The runtime's own helpers are not the container.
  CHECK(container_id_from_cgroup("/machine.slice/libpod-conmon-" + kId + ".scope") == "");
  CHECK(container_id_from_cgroup("/kubepods.slice/crio-conmon-" + kId + ".scope") == "");
  // Near misses: wrong length, upper case, not hex, no scope suffix.
  CHECK(container_id_from_cgroup("/docker/" + kId.substr(1)) == "");
  CHECK(container_id_from_cgroup("/docker/" + kId + "0") == "");
  std::string upper = kId;
  for (auto& c : upper) c = static_cast<char>(toupper(c));
  CHECK(container_id_from_cgroup("/docker/" + upper) == "");
  CHECK(container_id_from_cgroup("/system.slice/docker-" + kId.substr(0, 63) + "g.scope") == "");
  CHECK(container_id_from_cgroup("/system.slice/docker-" + kId) == "");
  CHECK(container_id_from_cgroup("/system.slice/docker.service") == "");
  // "lxc" as a directory with nothing under it.
  CHECK(container_id_from_cgroup("/lxc") == "");
  // Repeated and trailing slashes are harmless.
  CHECK(container_id_from_cgroup("//docker//" + kId + "/") == kId);
}

TEST_CASE("container_id is in the record only when the cgroup names one", "[container]") {
  TaskRecord r;
  r.proc.cgroup = "/system.slice/docker-" + kId + ".scope";
  r.proc.container_id = container_id_from_cgroup(r.proc.cgroup);
  auto j = nlohmann::json::parse(to_json_line(r));
  CHECK(j["cgroup"] == r.proc.cgroup);
  CHECK(j["container_id"] == kId);
  r.proc.cgroup = "/user.slice";
  r.proc.container_id = container_id_from_cgroup(r.proc.cgroup);
  j = nlohmann::json::parse(to_json_line(r));
  CHECK_FALSE(j.contains("container_id"));
}
