#!/usr/bin/env python3
"""jankbpf kernel lane, host side: boots Debian 12's own 6.1 kernels under
qemu (TCG) with an initramfs holding jankbpf, its libraries, the test
targets, trace-cmd, bpftool and busybox, and collects what the guest's
scenarios print on the serial console (scripts/kernel-lane/guest-init.sh).
tests/kernels asserts on the result; this file judges nothing but the
machine's health (timeouts, lockups, oopses, panics).

  lane.py boot ARCH [--scenarios S] [--repeat N] [--out DIR]
      boot once, print the console file and a health line
  lane.py soak ARCH [--boots B] [--repeat N]
      boot B times running the scan scenario N times each, report lockups

ARCH is x86 (x86_64, linux-image-6.1.0-N-cloud-amd64) or arm64
(linux-image-6.1.0-N-arm64, -M virt -cpu max: PAC, BTI). Binaries come from
$JANKBPF_BUILD (default <repo>/build) and $JANKBPF_BUILD_ARM64 (default
<repo>/build/arm64). Everything downloaded lives in build/kernel-lane/cache.
No shell is ever run: every tool gets an argument vector.
"""
import argparse
import glob
import gzip
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LANE_DIR = os.path.join(ROOT, "build", "kernel-lane")
CACHE = os.path.join(LANE_DIR, "cache")
GUEST_INIT = os.path.join(ROOT, "scripts", "kernel-lane", "guest-init.sh")
PREFERRED_ABI = 56  # linux-image-6.1.0-56-*: what issue 9 was seen on

ARCHES = {
    "x86": {
        "deb_arch": "amd64",
        "flavour": "cloud-amd64",
        "qemu": "qemu-system-x86_64",
        "qemu_pkg": "qemu-system-x86",
        # TCG only (nested KVM does not work here). -cpu max under TCG
        # boots Debian's cloud kernel; qemu64 was seen to hang.
        "machine": ["-M", "pc", "-cpu", "max"],
        # One host thread for both vCPUs. With a thread per vCPU, qemu 7.2
        # sometimes keeps running a stale translation of kernel text that
        # text_poke_bp() has rewritten. When an attach or a detach flips a
        # tracepoint's static key, a vCPU then runs the removed int3 again
        # and again: the kernel's handler finds no int3 in memory any more
        # (the patch is done), rewinds to the site, and the vCPU runs the
        # stale block once more, interrupts off; the guest goes silent.
        # Caught 2026-11-27 with the monitor (3 hangs in ~12 boots, each at
        # the attach right after an instance's exit): both vCPUs at
        # try_to_wake_up's trace_sched_waking site and just past
        # poke_int3_handler in exc_int3. Emulation, not the guest kernel:
        # on hardware the rewound CPU fetches the new instruction.
        "accel": "tcg,thread=single",
        "console": "ttyS0",
        "triplet": "x86_64-linux-gnu",
        "interp": "/lib64/ld-linux-x86-64.so.2",
        "lib_dirs": ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu"],
        "build_env": "JANKBPF_BUILD",
        "build_default": os.path.join(ROOT, "build"),
        "elf_machine": "Advanced Micro Devices X86-64",
        "boot_s": 60,
    },
    "arm64": {
        "deb_arch": "arm64",
        "flavour": "arm64",
        "qemu": "qemu-system-aarch64",
        "qemu_pkg": "qemu-system-arm",
        # -cpu max: pointer authentication, BTI, SVE, as issue 9 ran it.
        "machine": ["-M", "virt", "-cpu", "max"],
        # arm64 flips a static key by writing one instruction, no
        # breakpoint step: a stale translation runs the old one; no hang.
        "accel": "tcg",
        "console": "ttyAMA0",
        "triplet": "aarch64-linux-gnu",
        "interp": "/lib/ld-linux-aarch64.so.1",
        "lib_dirs": ["/usr/lib/aarch64-linux-gnu", "/lib/aarch64-linux-gnu",
                     "/usr/aarch64-linux-gnu/lib"],
        "build_env": "JANKBPF_BUILD_ARM64",
        "build_default": os.path.join(ROOT, "build", "arm64"),
        "elf_machine": "AArch64",
        "boot_s": 120,
    },
}

# Guest packages fetched (never installed) for arm64: the host's own
# binaries serve x86_64.
ARM64_GUEST_PKGS = ["busybox-static", "trace-cmd", "libtraceevent1", "libtracefs1",
                    "libzstd1", "bpftool", "libcap2", "libelf1", "zlib1g"]

# Lines of the console that mean the kernel is in trouble.
TROUBLE = re.compile(r"soft lockup|hard LOCKUP|BUG:|Oops|Kernel panic|"
                     r"rcu_\w+ (self-)?detected stall|rcu: INFO: \w+ detected stalls")

SCENARIO_KINDS = ("main", "markers", "tax", "churn", "waits", "idle", "causes")
WATCHDOGS = ("auto", "timer", "scan")
# Options a scenario's watchdog word may carry, "+"-joined (timer+tp+v).
RUN_OPTIONS = ("v", "vv", "tp", "tramp", "nostacks", "notrace", "comm", "klocks")
# Seconds each scenario may take in the guest beyond jankbpf's start-up
# (measured on x86_64: main ~25 s, markers ~20 s, 57 s when jankbpf is slow
# to stop; waits ~15 s; arm64 about twice that).
SCENARIO_S = {"main": 60, "markers": 80, "tax": 400, "churn": 240, "waits": 60, "idle": 40, "causes": 120}


def idle_trials():
    """LANE_IDLE_TRIALS: attaches the idle scenarios make (default 3; the
    bench's figure is from 20)."""
    v = os.environ.get("LANE_IDLE_TRIALS", "3")
    if not v.isdigit() or not 1 <= int(v) <= 100:
        raise ValueError(f"LANE_IDLE_TRIALS={v!r}: a whole number from 1 to 100")
    return int(v)


def cause_trials():
    """LANE_CAUSE_TRIALS: how many times the causes scenario plants each
    cause (default 1; the bench's cause table is from 20)."""
    v = os.environ.get("LANE_CAUSE_TRIALS", "1")
    if not v.isdigit() or not 1 <= int(v) <= 50:
        raise ValueError(f"LANE_CAUSE_TRIALS={v!r}: a whole number from 1 to 50")
    return int(v)


def disable_list():
    """LANE_JANKBPF_DISABLE: features the guest's jankbpf runs without
    (JANKBPF_DISABLE, comma-separated names of `--check`), for bisecting."""
    v = os.environ.get("LANE_JANKBPF_DISABLE", "")
    if not re.fullmatch(r"[a-z0-9_,]*", v):
        raise ValueError(f"LANE_JANKBPF_DISABLE={v!r}: feature names of --check, comma-separated")
    return v


def tax_rounds():
    """LANE_TAX_ROUNDS: the tax scenario's attaches, A B A B ... A (default
    3; more where the host is busy and the emulated machine's speed drifts)."""
    v = os.environ.get("LANE_TAX_ROUNDS", "3")
    if not v.isdigit() or not 1 <= int(v) <= 20:
        raise ValueError(f"LANE_TAX_ROUNDS={v!r}: a whole number from 1 to 20")
    return int(v)


def scenario_seconds(kind, attach_timeout):
    """What a scenario may take in the guest, its jankbpf starts included."""
    if kind == "idle":  # per trial: an attach, the spins, a stop
        return 10 + idle_trials() * (SCENARIO_S["idle"] + attach_timeout / 2)
    if kind == "causes":  # ~5 s of planted tasks and a quota task per trial, slower under TCG
        return SCENARIO_S[kind] + (cause_trials() - 1) * 12 + attach_timeout / 2
    if kind == "tax":  # per round: an attach, the loops with and without, a stop; then the stats attach
        return 20 + (tax_rounds() + 1) * (SCENARIO_S["tax"] / 3 + attach_timeout / 2)
    return SCENARIO_S[kind] + attach_timeout / 2


class Unavailable(Exception):
    """Something the lane needs is missing on this machine (a tool, a
    package, a build). Under CI this is a failure; elsewhere a skip."""


def arch_conf(arch):
    if arch not in ARCHES:
        raise ValueError(f"unknown arch {arch!r}: use one of {', '.join(ARCHES)}")
    return ARCHES[arch]


def build_dir(arch):
    conf = arch_conf(arch)
    return os.path.abspath(os.environ.get(conf["build_env"]) or conf["build_default"])


def _run(argv, **kw):
    """Runs a tool with an argument vector (never a shell)."""
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    return subprocess.run(argv, **kw)


def need_tool(name, pkg):
    path = shutil.which(name)
    if not path:
        raise Unavailable(f"{name} not found: install {pkg} "
                          f"(sudo scripts/install-deps.sh kernels)")
    return path


# --- packages ---------------------------------------------------------------

def _cached_deb(name, deb_arch):
    debs = sorted(glob.glob(os.path.join(CACHE, f"{glob.escape(name)}_*_{deb_arch}.deb")))
    debs += sorted(glob.glob(os.path.join(CACHE, f"{glob.escape(name)}_*_all.deb")))
    return debs[-1] if debs else None


def apt_download(name, deb_arch):
    """The .deb of package `name` for `deb_arch` in the cache, downloaded
    with apt-get download when it is not there yet (idempotent)."""
    os.makedirs(CACHE, exist_ok=True)
    deb = _cached_deb(name, deb_arch)
    if deb:
        return deb
    need_tool("apt-get", "apt")
    spec = name if deb_arch == _native_deb_arch() else f"{name}:{deb_arch}"
    p = _run(["apt-get", "download", spec], cwd=CACHE)
    deb = _cached_deb(name, deb_arch)
    if p.returncode != 0 or not deb:
        hint = ""
        if deb_arch == "arm64":
            hint = " (arm64 packages need `dpkg --add-architecture arm64` and apt-get update:" \
                   " sudo scripts/install-deps.sh kernels)"
        raise Unavailable(f"apt-get download {spec} failed{hint}: {p.stderr.strip()[-500:]}")
    return deb


def unpack(deb):
    """dpkg-deb -x into the cache, once; returns the folder."""
    dest = os.path.join(CACHE, "root", os.path.basename(deb)[:-4])
    done = os.path.join(dest, ".unpacked")
    if not os.path.exists(done):
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(dest)
        p = _run(["dpkg-deb", "-x", deb, dest])
        if p.returncode != 0:
            raise Unavailable(f"dpkg-deb -x {deb} failed: {p.stderr.strip()}")
        open(done, "w").close()
    return dest


_native = None


def _native_deb_arch():
    global _native
    if _native is None:
        _native = _run(["dpkg", "--print-architecture"]).stdout.strip()
    return _native


def _apt_has(name, deb_arch):
    spec = name if deb_arch == _native_deb_arch() else f"{name}:{deb_arch}"
    p = _run(["apt-cache", "show", "--no-all-versions", spec])
    return p.returncode == 0 and "Package:" in p.stdout


def kernel_package(arch):
    """linux-image-6.1.0-56-<flavour> when apt has it (or it is cached),
    else the newest 6.1.0-N the archive offers."""
    conf = arch_conf(arch)
    flavour, deb_arch = conf["flavour"], conf["deb_arch"]
    preferred = f"linux-image-6.1.0-{PREFERRED_ABI}-{flavour}"
    if _cached_deb(preferred, deb_arch) or _apt_has(preferred, deb_arch):
        return preferred
    need_tool("apt-cache", "apt")
    out = _run(["apt-cache", "search", "--names-only",
                rf"^linux-image-6\.1\.0-[0-9]+-{flavour}$"]).stdout
    abis = sorted(int(m.group(1)) for m in
                  re.finditer(rf"^linux-image-6\.1\.0-(\d+)-{re.escape(flavour)} ", out, re.M))
    if not abis:
        raise Unavailable(f"no linux-image-6.1.0-*-{flavour} in apt's lists "
                          f"(Debian 12 bookworm sources needed; apt-get update?)")
    return f"linux-image-6.1.0-{abis[-1]}-{flavour}"


def fetch_kernel(arch):
    """(package name, vmlinuz path) of the lane's kernel for `arch`."""
    conf = arch_conf(arch)
    pkg = kernel_package(arch)
    root = unpack(apt_download(pkg, conf["deb_arch"]))
    images = glob.glob(os.path.join(root, "boot", "vmlinuz-*"))
    if len(images) != 1:
        raise Unavailable(f"{pkg}: expected one boot/vmlinuz-*, found {images}")
    return pkg, images[0]


# --- ELF dependencies -------------------------------------------------------

def elf_needed(path):
    """(machine, interpreter or None, [DT_NEEDED]) of an ELF file."""
    need_tool("readelf", "binutils")
    h = _run(["readelf", "-hldW", path])
    if h.returncode != 0:
        raise Unavailable(f"readelf {path}: {h.stderr.strip()}")
    machine = re.search(r"Machine:\s+(.*)", h.stdout)
    interp = re.search(r"Requesting program interpreter: ([^\]]+)\]", h.stdout)
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", h.stdout)
    return (machine.group(1).strip() if machine else "?",
            interp.group(1) if interp else None, needed)


def resolve_libs(binaries, search):
    """{soname: host path} of every shared library the binaries need,
    recursively, looked up in `search` in order."""
    found, todo = {}, list(binaries)
    while todo:
        _, _, needed = elf_needed(todo.pop())
        for so in needed:
            if so in found:
                continue
            for d in search:
                cand = os.path.join(d, so)
                if os.path.exists(cand):
                    found[so] = os.path.realpath(cand)
                    todo.append(found[so])
                    break
            else:
                raise Unavailable(f"shared library {so} not found in {', '.join(search)}")
    return found


# --- initramfs ----------------------------------------------------------------

class Cpio:
    """A cpio archive in the kernel's "newc" format, gzip-compressed."""

    def __init__(self, path):
        self.f = gzip.open(path, "wb", compresslevel=6)
        self.ino = 1
        self.dirs = set()

    def _entry(self, name, mode, data=b"", nlink=1):
        name_b = name.encode() + b"\0"
        hdr = "070701" + "".join(f"{v:08x}" for v in (
            self.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name_b), 0))
        self.ino += 1
        self.f.write(hdr.encode() + name_b)
        self.f.write(b"\0" * ((4 - (110 + len(name_b)) % 4) % 4))
        self.f.write(data)
        self.f.write(b"\0" * ((4 - len(data) % 4) % 4))

    def mkdir(self, path):
        path = path.strip("/")
        parts = path.split("/")
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d and d not in self.dirs:
                self.dirs.add(d)
                self._entry(d, stat.S_IFDIR | 0o755, nlink=2)

    def file(self, path, data, mode=0o755):
        path = path.strip("/")
        self.mkdir(os.path.dirname(path))
        self._entry(path, stat.S_IFREG | mode, data)

    def copy(self, path, src, mode=None):
        with open(src, "rb") as f:
            data = f.read()
        self.file(path, data, mode if mode is not None else (os.stat(src).st_mode & 0o777))

    def symlink(self, path, target):
        path = path.strip("/")
        self.mkdir(os.path.dirname(path))
        self._entry(path, stat.S_IFLNK | 0o777, target.encode())

    def close(self):
        self._entry("TRAILER!!!", 0)
        self.f.close()


def guest_tools(arch):
    """{guest path: host path} of busybox, trace-cmd and bpftool for the
    guest arch, plus the library folders to search for their needs."""
    conf = arch_conf(arch)
    if arch == "x86":
        tools = {"/bin/busybox": need_tool("busybox", "busybox-static"),
                 "/usr/bin/trace-cmd": need_tool("trace-cmd", "trace-cmd"),
                 "/usr/sbin/bpftool": shutil.which("bpftool") or
                 (os.path.exists("/usr/sbin/bpftool") and "/usr/sbin/bpftool") or
                 need_tool("bpftool", "bpftool")}
        busybox_desc = _run(["file", "-b", tools["/bin/busybox"]]).stdout
        if "statically linked" not in busybox_desc and "static-pie" not in busybox_desc:
            raise Unavailable(f"{tools['/bin/busybox']} is not static: install busybox-static")
        return tools, []
    roots = [unpack(apt_download(p, conf["deb_arch"])) for p in ARM64_GUEST_PKGS]
    by_pkg = dict(zip(ARM64_GUEST_PKGS, roots))
    tools = {"/bin/busybox": os.path.join(by_pkg["busybox-static"], "bin", "busybox"),
             "/usr/bin/trace-cmd": os.path.join(by_pkg["trace-cmd"], "usr", "bin", "trace-cmd"),
             "/usr/sbin/bpftool": os.path.join(by_pkg["bpftool"], "usr", "sbin", "bpftool")}
    for g, h in tools.items():
        if not os.path.exists(h):
            raise Unavailable(f"{h} missing from the unpacked arm64 package ({g})")
    lib_dirs = []
    for r in roots:
        for sub in ("lib/aarch64-linux-gnu", "usr/lib/aarch64-linux-gnu"):
            if os.path.isdir(os.path.join(r, sub)):
                lib_dirs.append(os.path.join(r, sub))
    return tools, lib_dirs


TARGETS = ["stack_loop", "jank_target", "marker_loop", "getppid", "taxbench", "jobs_loop", "cause_target"]

# The kernel package's modules the guest loads (insmod, in this order): a
# blk-mq block device in memory (null_blk) for the tax scenario's block-I/O
# loop, so that block:block_rq_* fire without a disk image.
GUEST_MODULES = ["kernel/fs/configfs/configfs.ko", "kernel/drivers/block/null_blk/null_blk.ko"]


def guest_modules(vmlinuz):
    """{guest file name: host path} of GUEST_MODULES in the kernel package
    `vmlinuz` came from (those it has)."""
    root = os.path.dirname(os.path.dirname(vmlinuz))
    out = {}
    for rel in GUEST_MODULES:
        found = glob.glob(os.path.join(root, "lib", "modules", "*", rel))
        if len(found) == 1:
            out[os.path.basename(rel)] = found[0]
    return out


# The virtio-blk driver and ext4 and what they need, in load order (Debian
# builds them as modules; on arm64 virtio itself is built in, on x86_64
# ext4). A module the
# kernel package lacks is left out: then the guest finds no disk.
DISK_MODULES = ["drivers/virtio/virtio_ring", "drivers/virtio/virtio",
                "drivers/virtio/virtio_pci_legacy_dev", "drivers/virtio/virtio_pci_modern_dev",
                "drivers/virtio/virtio_pci", "drivers/block/virtio_blk",
                # ext4, built in on x86_64's cloud kernel, modules on arm64's
                "crypto/crc32c_generic", "lib/crc16", "fs/mbcache", "fs/jbd2/jbd2", "fs/ext4/ext4"]
DISK_MB = 160


def disk_modules(vmlinuz):
    """[(name, host path)] of DISK_MODULES in the kernel package next to vmlinuz."""
    release = os.path.basename(vmlinuz).replace("vmlinuz-", "", 1)
    root = os.path.join(os.path.dirname(os.path.dirname(vmlinuz)), "lib", "modules", release, "kernel")
    return [(os.path.basename(m), os.path.join(root, m + ".ko")) for m in DISK_MODULES
            if os.path.exists(os.path.join(root, m + ".ko"))]


def make_disk(path):
    """An empty ext4 image for the guest's /dev/vda (causes fault and io need
    a real block device: the initramfs is in RAM). False when mkfs.ext4
    fails; Unavailable without it."""
    mkfs = need_tool("mkfs.ext4", "e2fsprogs")
    with open(path, "wb") as f:
        f.truncate(DISK_MB << 20)
    return subprocess.run([mkfs, "-q", "-F", "-L", "lanedisk", path], capture_output=True).returncode == 0


def build_initramfs(arch, scenarios, out_path, attach_timeout, kernel_config=None, modules=None, disk_mods=()):
    """Writes the initramfs for `arch` running `scenarios` (a list of
    (name, kind, watchdog)); returns a description for the log.
    kernel_config: the kernel package's config file, installed as
    /boot/config-<release> the way Debian installs it (jankbpf reads the
    tick rate there)."""
    conf = arch_conf(arch)
    bdir = build_dir(arch)
    jankbpf = os.path.join(bdir, "jankbpf")
    targets = {t: os.path.join(bdir, "tests", t) for t in TARGETS}
    if arch == "arm64":
        targets["stack_loop_pac"] = os.path.join(bdir, "tests", "stack_loop_pac")
    # A 32-bit process: static i386, checked apart (its machine is not the guest's).
    ia32 = {"loop32": os.path.join(bdir, "tests", "loop32")} if arch == "x86" else {}
    make_hint = "make -j2 all apps" if arch == "x86" else "make -j2 ARCH=arm64 all apps"
    for p in [jankbpf, *targets.values(), *ia32.values()]:
        if not os.path.exists(p):
            raise Unavailable(f"{p} is not built ({conf['build_env']}={bdir}; run {make_hint})")
    for p in [jankbpf, *targets.values()]:
        machine, _, _ = elf_needed(p)
        if machine != conf["elf_machine"]:
            raise Unavailable(f"{p} is built for {machine}, not {conf['elf_machine']}")
    for p in ia32.values():
        machine, interp, needed = elf_needed(p)
        if machine != "Intel 80386" or interp or needed:
            raise Unavailable(f"{p} is not a static i386 executable ({machine}, needs {interp} {needed})")

    tools, extra_dirs = guest_tools(arch)
    binaries = [jankbpf, *targets.values(), *tools.values()]
    libs = resolve_libs([b for b in binaries if b != tools["/bin/busybox"]],
                        extra_dirs + conf["lib_dirs"])
    interp = None
    for d in conf["lib_dirs"]:
        cand = os.path.join(d, os.path.basename(conf["interp"]))
        if os.path.exists(cand):
            interp = os.path.realpath(cand)
            break
    if not interp:
        raise Unavailable(f"dynamic loader {os.path.basename(conf['interp'])} not found in "
                          f"{', '.join(conf['lib_dirs'])}")

    libdir = f"/lib/{conf['triplet']}"
    cpio = Cpio(out_path)
    for d in ("proc", "sys", "dev", "tmp", "sbin", "usr/bin", "usr/sbin", "lane/bin", "lane/modules", "boot"):
        cpio.mkdir(d)
    for name, host in (modules or {}).items():
        cpio.copy(f"lane/modules/{name}", host, 0o644)
    if kernel_config:
        cpio.copy(f"boot/{os.path.basename(kernel_config)}", kernel_config, 0o644)
    with open(GUEST_INIT, "rb") as f:
        cpio.file("init", f.read())
    cfg = (f"LANE_ARCH={arch}\nLANE_LIBDIR={libdir}\n"
           f"LANE_ATTACH_TIMEOUT={int(attach_timeout)}\n"
           f"LANE_IDLE_TRIALS={idle_trials()}\n"
           f"LANE_CAUSE_TRIALS={cause_trials()}\n"
           f"LANE_TAX_ROUNDS={tax_rounds()}\n"
           f"LANE_JANKBPF_DISABLE={disable_list()}\n"
           f"LANE_SCENARIOS='{' '.join(f'{n}:{k}:{w}' for n, k, w in scenarios)}'\n")
    cpio.file("lane/config", cfg.encode(), 0o644)
    if disk_mods:  # loaded at boot, in this order (lane/modules exists already)
        for name, host in disk_mods:
            cpio.copy(f"lane/modules/{name}.ko", host, 0o644)
        cpio.file("lane/modules/order", "".join(f"{n}\n" for n, _ in disk_mods).encode(), 0o644)
    for g, h in tools.items():
        cpio.copy(g, h, 0o755)
    cpio.symlink("bin/sh", "busybox")
    cpio.copy("usr/bin/jankbpf", jankbpf, 0o755)
    for t, p in [*targets.items(), *ia32.items()]:
        cpio.copy(f"lane/bin/{t}", p, 0o755)
    # Two copies of marker_loop: one for a uprobe marker, one for USDT.
    cpio.copy("lane/bin/marker_loop_uprobe", targets["marker_loop"], 0o755)
    cpio.copy("lane/bin/marker_loop_usdt", targets["marker_loop"], 0o755)
    for so, h in sorted(libs.items()):
        cpio.copy(f"{libdir}/{so}", h, 0o755)
    cpio.copy(conf["interp"], interp, 0o755)
    cpio.close()
    return {"build": bdir, "libs": sorted(libs), "interp": interp, "tools": tools}


# --- boot -------------------------------------------------------------------

# A guest that reported a lockup and then printed nothing else for this
# long is not coming back (seen: a soft lockup on 6.1 x86_64, reported
# every 28 s for 9 minutes while both vCPUs made no progress): the boot ends
# there rather than at its time limit.
STUCK_S = 60
LOCKUP = re.compile(r"soft lockup|hard LOCKUP|detected stalls?")
# A guest whose both vCPUs hang with interrupts off reports nothing at all
# (seen once on 6.1 x86_64, at an attach right after the last instance's
# exit): no scenario is silent for this long, so the boot ends there too.
SILENT_S = 300


class StuckWatch:
    """Reads the console as it grows: stuck once a lockup was reported and
    no line but lockup reports came for STUCK_S, or no line at all came for
    SILENT_S."""

    def __init__(self, console):
        self.console, self.pos, self.partial = console, 0, b""
        self.progress = time.monotonic()
        self.lockup = self.silent = False

    def stuck(self):
        try:
            with open(self.console, "rb") as f:
                f.seek(self.pos)
                new = f.read()
        except OSError:
            return False
        self.pos += len(new)
        *lines, self.partial = (self.partial + new).split(b"\n")
        for l in lines:
            text = l.decode("utf-8", "replace")
            if LOCKUP.search(text):
                self.lockup = True
            elif text.strip():
                self.progress = time.monotonic()
        quiet = time.monotonic() - self.progress
        self.silent = quiet > SILENT_S
        return (self.lockup and quiet > STUCK_S) or self.silent


class Boot:
    """One boot's outcome: the console text, its sections, and trouble."""

    stuck = ""  # why the boot was stopped early: "silent", "lockup" or ""

    def __init__(self, arch, kernel_pkg, console_path, elapsed, timed_out, rc, limit):
        self.arch = arch
        self.kernel_pkg = kernel_pkg
        self.console_path = console_path
        self.elapsed = elapsed
        self.timed_out = timed_out
        self.rc = rc
        self.limit = limit
        with open(console_path, "rb") as f:
            self.console = f.read().decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "")
        self.sections = parse_sections(self.console)
        self.trouble = [l for l in self.console.splitlines() if TROUBLE.search(l)]
        self.done = "@@LANE DONE" in self.console

    def tail(self, n=60):
        return "\n".join(self.console.splitlines()[-n:])

    def health(self):
        """None when the boot ran to the end cleanly, else why not."""
        why = []
        if self.timed_out:
            why.append(f"qemu timed out after {self.limit:.0f} s")
        elif self.stuck == "silent":
            why.append(f"the guest was stopped after {self.elapsed:.0f} s: no output at all for {SILENT_S} s")
        elif self.stuck == "lockup":
            why.append(f"the guest was stopped after {self.elapsed:.0f} s: a lockup on its console "
                       f"and no output for {STUCK_S} s")
        elif not self.done:
            why.append(f"the guest never finished its scenarios (qemu rc={self.rc})")
        if self.trouble:
            why.append("kernel trouble on the console:\n  " + "\n  ".join(self.trouble[:20]))
        return "; ".join(why) or None

    def context(self, line, before=40, after=40):
        """Console lines around the first line containing `line`."""
        lines = self.console.splitlines()
        for i, l in enumerate(lines):
            if line in l:
                return "\n".join(lines[max(0, i - before):i + after])
        return ""


def parse_sections(text):
    """{name: (body, rc)} of the console's @@LANE BEGIN/END sections."""
    out, cur, body = {}, None, []
    for line in text.splitlines():
        m = re.match(r"@@LANE BEGIN (\S+)$", line)
        if m:
            cur, body = m.group(1), []
            continue
        m = re.match(r"@@LANE END (\S+) rc=(\S*)$", line)
        if m and m.group(1) == cur:
            while body and body[-1] == "":
                body.pop()
            rc = int(m.group(2)) if re.fullmatch(r"-?\d+", m.group(2)) else None
            out[cur] = ("\n".join(body), rc)
            cur = None
            continue
        if cur is not None:
            body.append(line)
    return out


def default_scenarios(arch, repeat=1):
    """(name, kind, watchdog) the lane runs: main and markers with the timer
    and the scan watchdog, main with auto; the scan ones `repeat` times;
    waits (each event-loop wait) with the timer watchdog."""
    out = []
    for wd in ("timer", "scan"):
        for i in range(1, (repeat if wd == "scan" else 1) + 1):
            sfx = "" if i == 1 else f"-r{i}"
            out.append((f"{wd}-main{sfx}", "main", wd))
            out.append((f"{wd}-markers{sfx}", "markers", wd))
    out.append(("auto-main", "main", "auto"))
    # x86_64's 6.1 has BPF trampolines, so its other scenarios hook the
    # waits with them: one more with the syscall-tracepoint fallback.
    # (arm64's 6.1 has none: all of its scenarios use tracepoints.)
    if arch == "x86":
        out.append(("tp-main", "main", "timer+tp"))
    # Every wait the arch has, bounding tasks: with each hook kind it has.
    out.append(("timer-waits", "waits", "timer"))
    if arch == "x86":
        out.append(("tp-waits", "waits", "timer+tp"))
    # Threads idle in their waits when jankbpf attaches (issue 24): with
    # trampolines their waits' returns are never seen.
    out.append(("timer-idle", "idle", "timer"))
    if arch == "x86":
        out.append(("tp-idle", "idle", "timer+tp"))
    # Causes (README, Why): each planted cause named, on this kernel's hooks.
    out.append(("timer-causes", "causes", "timer"))
    return out


def parse_scenarios(spec):
    """"name:kind:watchdog,..." -> list, validated (it goes into the guest's
    shell configuration, so only known words and simple names pass)."""
    out = []
    for item in spec.split(","):
        parts = item.strip().split(":")
        if len(parts) != 3 or not re.fullmatch(r"[a-z0-9][a-z0-9-]*", parts[0]) \
                or parts[1] not in SCENARIO_KINDS or parts[2].split("+")[0] not in WATCHDOGS \
                or any(o not in RUN_OPTIONS for o in parts[2].split("+")[1:]):
            raise ValueError(f"bad scenario {item!r}: NAME:KIND:WATCHDOG[+OPTION...], KIND one of "
                             f"{', '.join(SCENARIO_KINDS)}, WATCHDOG one of {', '.join(WATCHDOGS)}, "
                             f"OPTION one of {', '.join(RUN_OPTIONS)}")
        out.append(tuple(parts))
    return out


def boot(arch, scenarios=None, out_dir=None, attach_timeout=None, log=print):
    """Builds the initramfs, boots the kernel under qemu (TCG) with a hard
    timeout, and returns a Boot. Raises Unavailable when something needed
    is missing."""
    conf = arch_conf(arch)
    scenarios = scenarios or default_scenarios(arch)
    qemu = need_tool(conf["qemu"], conf["qemu_pkg"])
    kernel_pkg, vmlinuz = fetch_kernel(arch)
    out_dir = out_dir or os.path.join(LANE_DIR, arch)
    os.makedirs(out_dir, exist_ok=True)
    # jankbpf's start-up (BPF verification) is slow under TCG.
    attach_timeout = attach_timeout or (240 if arch == "arm64" else 120)
    tmp = tempfile.mkdtemp(prefix=f"jankbpf-lane-{arch}-")
    try:
        initrd = os.path.join(tmp, "initramfs.gz")
        config = os.path.join(os.path.dirname(vmlinuz),
                              os.path.basename(vmlinuz).replace("vmlinuz-", "config-", 1))
        disk = os.path.join(tmp, "disk.img")
        modules = disk_modules(vmlinuz) if make_disk(disk) else []
        desc = build_initramfs(arch, scenarios, initrd, attach_timeout,
                               config if os.path.exists(config) else None, guest_modules(vmlinuz), modules)
        log(f"lane {arch}: kernel {kernel_pkg} ({vmlinuz}); jankbpf from {desc['build']}; "
            f"initramfs {os.path.getsize(initrd) // 1024} KiB, libs {', '.join(desc['libs'])}")
        # A console of this run's own (another lane may be booting the same
        # arch from this tree); console.log is the latest finished one.
        console = os.path.join(out_dir, f"console.{os.getpid()}.log")
        if os.path.exists(console):
            os.unlink(console)
        limit = conf["boot_s"] + sum(scenario_seconds(k, attach_timeout) for _, k, _ in scenarios)
        # panic=-1 with -no-reboot: a panic ends qemu at once; loglevel=4
        # keeps errors (lockups, oopses) on the console and little else.
        # LANE_LOGLEVEL=7 keeps the lockup's backtraces too, for debugging.
        loglevel = int(os.environ.get("LANE_LOGLEVEL", "4"))
        append = f"console={conf['console']} panic=-1 loglevel={loglevel} rdinit=/init"
        # LANE_KERNEL_ARGS adds kernel parameters (e.g. softlockup_panic=1).
        extra = os.environ.get("LANE_KERNEL_ARGS", "")
        if not re.fullmatch(r"[A-Za-z0-9_.,=/ -]*", extra):
            raise ValueError(f"LANE_KERNEL_ARGS {extra!r}: only letters, digits and _.,=/- allowed")
        if extra:
            append += " " + extra
        argv = [qemu, *conf["machine"], "-accel", conf["accel"], "-smp", "2", "-m", "2G",
                "-nodefaults", "-display", "none", "-no-reboot", "-net", "none",
                "-serial", f"file:{console}", "-kernel", vmlinuz, "-initrd", initrd,
                "-append", append]
        if modules:
            argv += ["-drive", f"file={disk},if=none,format=raw,id=lanedisk",
                     "-device", "virtio-blk-pci,drive=lanedisk"]
        # LANE_QEMU_MONITOR=PATH: a monitor socket, to read a hung guest's
        # registers (`info registers -a`) for debugging.
        if os.environ.get("LANE_QEMU_MONITOR"):
            argv += ["-monitor", f"unix:{os.environ['LANE_QEMU_MONITOR']},server,nowait"]
        log(f"lane {arch}: {' '.join(argv)}  (timeout {limit:.0f} s)")
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        timed_out, stuck = False, ""
        qout = b""
        watch = StuckWatch(console)
        while True:
            try:
                qout, _ = proc.communicate(timeout=5)
                break
            except subprocess.TimeoutExpired:
                pass
            elapsed = time.monotonic() - t0
            if elapsed > limit:
                timed_out = True
            elif watch.stuck():
                stuck = "silent" if watch.silent else "lockup"
            else:
                continue
            proc.kill()
            qout, _ = proc.communicate()
            break
        elapsed = time.monotonic() - t0
        if qout.strip():
            with open(os.path.join(out_dir, "qemu.out"), "wb") as f:
                f.write(qout)
        if not os.path.exists(console):
            raise Unavailable(f"{qemu} wrote no console: {qout.decode(errors='replace')[-800:]}")
        b = Boot(arch, kernel_pkg, console, elapsed, timed_out, proc.returncode, limit)
        b.stuck = stuck
        b.console_path = os.path.join(out_dir, "console.log")
        os.replace(console, b.console_path)
        log(f"lane {arch}: {elapsed:.0f} s, console {console}, "
            f"health: {b.health() or 'ok'}")
        return b
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("boot", help="boot once and report")
    b.add_argument("arch", choices=list(ARCHES))
    b.add_argument("--scenarios", help="NAME:KIND:WATCHDOG,... (default: the lane's)")
    b.add_argument("--repeat", type=int, default=1, help="run the scan scenarios N times")
    b.add_argument("--out", help="folder for console.log (default build/kernel-lane/ARCH)")
    s = sub.add_parser("soak", help="repeat the scan scenario, report lockups")
    s.add_argument("arch", choices=list(ARCHES))
    s.add_argument("--boots", type=int, default=2)
    s.add_argument("--repeat", type=int, default=5, help="scan runs per boot")
    s.add_argument("--verbose-every", type=int, default=2,
                   help="every Nth run adds -v (issue 9 saw the lockup with -v)")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "boot":
            sc = parse_scenarios(a.scenarios) if a.scenarios else default_scenarios(a.arch, a.repeat)
            r = boot(a.arch, sc, a.out)
            print(f"sections: {len(r.sections)}")
            return 0 if not r.health() else 1
        bad = 0
        for i in range(1, a.boots + 1):
            sc = [(f"scan-{j}", "main", "scan+v" if a.verbose_every and j % a.verbose_every == 0
                   else "scan") for j in range(1, a.repeat + 1)]
            r = boot(a.arch, sc, os.path.join(LANE_DIR, f"soak-{a.arch}-{i}"))
            ran = [n for n, _, _ in sc if f"{n}/exit" in r.sections]
            print(f"soak boot {i}: {len(ran)}/{len(sc)} runs finished, "
                  f"{r.elapsed:.0f} s, health: {r.health() or 'ok'}")
            if r.health():
                bad += 1
                first = r.trouble[0] if r.trouble else "@@LANE START"
                print(r.context(first, 30, 30) if r.trouble else r.tail(40))
        print(f"soak: {bad} of {a.boots} boots in trouble")
        return 1 if bad else 0
    except (Unavailable, ValueError) as e:
        print(f"lane: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
