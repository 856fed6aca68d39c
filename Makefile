# jankbpf build, in the libbpf-bootstrap manner: one build folder,
#   clang -target bpf -> bpftool gen object -> bpftool gen skeleton,
# userspace objects depending on the skeletons they include.
#
#   make                 build/jankbpf (native)
#   make ARCH=arm64      build/arm64/jankbpf, cross-built with aarch64-linux-gnu
#   make deps            install missing Debian packages (ARCH=arm64 adds the cross set)
#   make run             deps + build + run jankbpf system-wide (root)
#   make test            deps + build + unit tests + end-to-end tests (root)
#   make kernels         the kernel lane: Debian 12's 6.1 kernels (x86_64, arm64)
#                        under qemu, jankbpf scenarios inside (root; tests/kernels)
#   make bench           benchmarks (bench/jankbench) into bench/results/, rendered to
#                        bench/RESULTS.md; BENCH_ONLY=a,b some (scripts/bench.sh)
#   make fuzz            libFuzzer targets (build/fuzz/), FUZZ_SECONDS each
#   make vmlinux         regenerate bpf/vmlinux/$(ARCH)/vmlinux.h
#   make deb             build/deb/jankbpf_*.deb with dpkg-buildpackage, then lintian
#   make deb-check       deb + install it with dpkg, run it, remove it (root)

# Every core, unless the caller chose (make -jN): a fresh CI machine builds
# everything, natively and for arm64.
ifeq ($(filter -j% --jobserver%,$(MAKEFLAGS)),)
  MAKEFLAGS += -j$(shell nproc)
endif

HOST_ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
ARCH ?= $(HOST_ARCH)

ifeq ($(ARCH),$(HOST_ARCH))
  OUTPUT ?= build
  CROSS :=
else
  OUTPUT ?= build/$(ARCH)
  ifeq ($(ARCH),arm64)
    CROSS := aarch64-linux-gnu-
  else
    $(error ARCH=$(ARCH) is not supported: use x86 or arm64)
  endif
endif

CLANG ?= clang
BPFTOOL ?= bpftool
CXX := $(CROSS)g++
CC := $(CROSS)gcc

# --- cross-building (ARCH=arm64 on an x86_64 host) -------------------------
# Debian's aarch64-linux-gnu-gcc/g++ already search the multiarch folders
# (/usr/include/aarch64-linux-gnu, /usr/lib/aarch64-linux-gnu) where the
# :arm64 -dev packages of `make deps ARCH=arm64` put their files, and
# /usr/include for the arch-independent headers, so no -I/-L/--sysroot is
# needed. pkg-config is not arch-neutral: use $(PKG_CONFIG), which for arm64
# is aarch64-linux-gnu-pkg-config (pkgconf:arm64), or the host's
# glibconfig.h and x86_64 libraries end up in an arm64 link.
PKG_CONFIG := $(CROSS)pkg-config
# ---------------------------------------------------------------------------

VMLINUX := bpf/vmlinux/$(ARCH)/vmlinux.h
BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_SKELS := $(patsubst bpf/%.bpf.c,$(OUTPUT)/%.skel.h,$(BPF_SRCS))

SRCS := $(shell find src -name '*.cpp' ! -name main.cpp | sort)
OBJS := $(patsubst src/%.cpp,$(OUTPUT)/obj/%.o,$(SRCS))
MAIN_OBJ := $(OUTPUT)/obj/main.o
UNIT_SRCS := $(wildcard tests/unit/*.cpp)
UNIT_OBJS := $(patsubst tests/unit/%.cpp,$(OUTPUT)/unit/%.o,$(UNIT_SRCS))
APP_SRCS := $(wildcard tests/apps/*.c)
APPS := $(patsubst tests/apps/%.c,$(OUTPUT)/tests/%,$(APP_SRCS))
APPS += $(OUTPUT)/tests/glib_loop_sdt  # glib_loop.c again, with GLib's SDT probes
APPS += $(OUTPUT)/tests/getppid        # the syscall-tax loop of bench/, for the kernel lane
APPS += $(OUTPUT)/tests/taxbench       # its page-fault, futex and block-I/O loops
ifeq ($(ARCH),arm64)
# stack_loop.c again with pointer authentication and BTI, for the kernel lane.
APPS += $(OUTPUT)/tests/stack_loop_pac
endif
ifeq ($(ARCH),x86)
# A 32-bit (i386) event loop, for the ia32 entry points in the kernel lane.
APPS += $(OUTPUT)/tests/loop32
endif
ifeq ($(ARCH),$(HOST_ARCH))
# A Wayland client for the frame tests (issue 28): native only, its
# libwayland-client and protocol XML are the host's.
APPS += $(OUTPUT)/tests/wl_frames
endif

VERSION := $(shell git describe --always --dirty 2>/dev/null || echo unknown)

CXXFLAGS ?= -O2 -g
CXXFLAGS += -std=c++20 -Wall -Wextra -Wno-missing-field-initializers \
	-Iinclude -Isrc -I$(OUTPUT) -MMD -MP
LDLIBS := -lbpf -lelf -ldw -lz -lpthread
APP_CFLAGS := -O2 -g -fomit-frame-pointer -pthread -Wall

# The BPF side is compiled for the target arch: CO-RE relocates field
# offsets, but syscall numbers and pt_regs layout are per arch.
BPF_CFLAGS := -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) -Wall \
	-I$(dir $(VMLINUX)) -Ibpf/compat -Iinclude

.PHONY: all deps test-deps run test unit e2e package-check deb deb-check arm64-deps arm64-check kernels bench vmlinux clean apps FORCE \
	fuzz fuzz-bin fuzz-smoke fuzz-srcs
.DELETE_ON_ERROR:
.SECONDARY:

all: $(OUTPUT)/jankbpf

deps:
	@scripts/install-deps.sh $(ARCH)

# Root-only entry points: install what is missing first, then build.
run: deps
	@$(MAKE) --no-print-directory all
	$(OUTPUT)/jankbpf $(ARGS)

test: deps
	@# One at a time: two apt-get runs at once fail on its lock.
	@$(MAKE) --no-print-directory test-deps
	@# The arm64 libraries too: unit tests replay arm64 captures against them.
	@$(MAKE) --no-print-directory arm64-deps
	@$(MAKE) --no-print-directory all unit-bin apps
	@# The bench's renderer and goals, and the suites' runner: pure, seconds.
	@/usr/bin/python3 -m pytest -q -p no:cacheprovider tests/bench tests/scripts
	@# Two lanes at once (scripts/run-suites.sh): the suites with timing
	@# checks one after the other in front; beside them, at nice 19 in a
	@# session of their own, the suites that only compute (the fuzz targets'
	@# build and smoke run, the package build and install, the arm64 cross
	@# build and its unit tests under qemu-user), which the front's mostly
	@# sleeping targets leave a core for. Then the kernel lane alone: Debian
	@# 12's 6.1 kernels under qemu TCG, whose guests' clocks want the CPUs.
	@# Each suite's wall time, so what makes `make test` long can be seen.
	@MAKE="$(MAKE)" scripts/run-suites.sh "unit e2e package-check" "fuzz-smoke deb-check arm64-check"
	@t0=$$(date +%s); $(MAKE) --no-print-directory kernels || exit 1; \
	  echo "test: kernels took $$(( $$(date +%s) - t0 )) s"

# Both architectures from day one: the arm64 cross-build must build and its
# pure-logic unit tests pass under qemu-aarch64 (x86_64 hosts only).
# What the report tests need beyond the build: chromium, protoc, redis,
# speedscope (into $(OUTPUT)/test-deps).
test-deps:
	@scripts/install-test-deps.sh $(OUTPUT)

arm64-deps:
ifeq ($(HOST_ARCH),x86)
	@scripts/install-deps.sh arm64
endif

arm64-check: arm64-deps
ifeq ($(HOST_ARCH),x86)
	timeout 1800 scripts/check-arm64.sh --unit
endif

# The kernel lane (issue 9): boots Debian 12's own 6.1 kernels, x86_64 and
# arm64, under qemu TCG with jankbpf, the test targets, trace-cmd and bpftool
# in an initramfs, and asserts from here on what the scenarios inside print.
# JANKBPF_BUILD / JANKBPF_BUILD_ARM64 point it at other builds; under CI=true
# anything missing fails instead of skipping. x86_64 hosts only.
kernels:
ifeq ($(HOST_ARCH),x86)
	@scripts/install-deps.sh kernels
	@[ -n "$$JANKBPF_BUILD" ] || $(MAKE) --no-print-directory all apps
	@[ -n "$$JANKBPF_BUILD_ARM64" ] || $(MAKE) --no-print-directory ARCH=arm64 all apps
	timeout 1500 /usr/bin/python3 -m pytest -v --durations=10 -p no:cacheprovider tests/kernels
else
	@echo "kernels: the kernel lane needs an x86_64 host (it boots x86_64 and arm64 guests)" >&2
	@[ "$$CI" != true ]
endif

unit-bin: $(OUTPUT)/jankbpf-unit
apps: $(APPS)

# As root in a private mount namespace with tracefs unmounted, each case
# that needs tracefs alone in a fresh one: no case relies on what an
# earlier one (or suite) set up (scripts/run-unit.sh).
unit: $(OUTPUT)/jankbpf-unit
	scripts/run-unit.sh $(OUTPUT)/jankbpf-unit

e2e: $(OUTPUT)/jankbpf $(APPS)
	JANKBPF_BUILD=$(abspath $(OUTPUT)) /usr/bin/python3 -m pytest -v --durations=30 -p no:cacheprovider tests/e2e

# The files the package installs (unit, logrotate snippet, man page):
# quick, no package build.
package-check: $(OUTPUT)/jankbpf
	JANKBPF_BUILD=$(abspath $(OUTPUT)) /usr/bin/python3 -m pytest -v -p no:cacheprovider tests/package/test_unit_files.py

# The package itself, built with Debian's tools from a copy of the tree
# (results in build/deb/), lintian errors failing it.
deb:
	scripts/build-deb.sh

# Installs the .deb with dpkg, runs the installed binary, checks the unit
# is in place and verifies, removes it again. Root. In `make test` after the
# suites: the package build compiles everything again (about 75 s at -j2).
deb-check: deb
	/usr/bin/python3 -m pytest -v -p no:cacheprovider tests/package/test_deb.py

# --- fuzzing (issue 10) ------------------------------------------------------
# One libFuzzer target per parser of what a watched process controls, built
# with Debian's clang under ASan+UBSan into build/fuzz/ (its own objects: the
# normal build stays gcc, unsanitized). Each target links only the sources
# it needs; scripts/fuzz.sh runs them (smoke | run | bench).
FUZZ_OUT := build/fuzz
FUZZ_CXX ?= clang++
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CXXFLAGS := -std=c++20 -O2 -g -fno-omit-frame-pointer $(FUZZ_SAN) \
	-fsanitize-coverage-ignorelist=tests/fuzz/coverage-ignore.txt \
	-Iinclude -Isrc -I$(FUZZ_OUT) -MMD -MP
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := fuzz_maps fuzz_perf_map fuzz_perf_sample fuzz_config fuzz_elf_notes \
	fuzz_marker_spec fuzz_stack_tree fuzz_json_sink fuzz_python_frames fuzz_v8_frames fuzz_kernel_funcs \
	fuzz_stack_log fuzz_report_jsonl fuzz_hotspot_frames \
	fuzz_causes fuzz_inflate
# What each target links, beyond its harness (src/ paths without .cpp).
FUZZ_SRCS_fuzz_maps := stack/maps util/safe_open
FUZZ_SRCS_fuzz_perf_map := stack/perf_map stack/maps util/safe_open util/budget
FUZZ_SRCS_fuzz_perf_sample := stack/perf_sample arch/arch
FUZZ_SRCS_fuzz_config := config/jank_config
FUZZ_SRCS_fuzz_elf_notes := stack/elf_image elf/build_id markers/probe_elf stack/kallsyms \
	stack/maps util/safe_open util/budget util/lazy_pages util/own_clock stack/inflate_index
FUZZ_LIBS_fuzz_elf_notes := -lelf -ldw -lz -lpthread
FUZZ_SRCS_fuzz_marker_spec := markers/marker_spec
FUZZ_SRCS_fuzz_inflate := stack/inflate_index
FUZZ_LIBS_fuzz_inflate := -lz
# wait_state_name() lives in the resolver, which brings the stack library.
FUZZ_SRCS_fuzz_stack_tree := $(patsubst src/%.cpp,%,$(filter src/stack/%.cpp src/util/%.cpp src/arch/%.cpp src/elf/%.cpp,$(SRCS))) \
	bpf/test_seams
FUZZ_LIBS_fuzz_stack_tree := -lelf -ldw -lz -lpthread
FUZZ_SRCS_fuzz_json_sink := output/json_output output/json_frames frame/frame_tracker frame/frame_stats util/safe_open util/clock util/budget
FUZZ_SRCS_fuzz_python_frames := runtime/python_frames runtime/python_layout
FUZZ_SRCS_fuzz_v8_frames := runtime/v8_frames runtime/v8_layout util/clock
FUZZ_SRCS_fuzz_hotspot_frames := runtime/hotspot_frames runtime/hotspot_methods runtime/hotspot_threads \
	runtime/hotspot_streams runtime/hotspot_layout util/clock
FUZZ_SRCS_fuzz_kernel_funcs := bpf/kernel_funcs
FUZZ_LIBS_fuzz_kernel_funcs := -lbpf -lelf -lz
# `jankbpf report`'s readers (issue 26): stack logs, and JSON lines.
FUZZ_SRCS_fuzz_stack_log := report/sampled report/run report/perfetto report/perfetto_frames report/protobuf report/cause_view frame/frame_tracker \
	frame/frame_stats $(FUZZ_SRCS_fuzz_stack_tree)
FUZZ_LIBS_fuzz_stack_log := $(FUZZ_LIBS_fuzz_stack_tree)
FUZZ_SRCS_fuzz_report_jsonl := report/jsonl_reader report/jsonl_frames report/sampled report/run report/input_file \
	frame/frame_tracker frame/frame_stats $(FUZZ_SRCS_fuzz_stack_tree)
FUZZ_LIBS_fuzz_report_jsonl := $(FUZZ_LIBS_fuzz_stack_tree)
# Attribution builds stack trees of the followed threads' samples.
FUZZ_SRCS_fuzz_causes := $(FUZZ_SRCS_fuzz_stack_tree) cause/attribute cause/why cause/syscalls cause/stack_source \
	cause/identity cause/evidence cause/irq_text cause/io_identity cause/kernel_causes cause/kernel_names
FUZZ_LIBS_fuzz_causes := $(FUZZ_LIBS_fuzz_stack_tree)

$(FUZZ_OUT)/obj/%.o: src/%.cpp
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(FUZZ_CXXFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
$(FUZZ_OUT)/harness/%.o: tests/fuzz/%.cpp
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(FUZZ_CXXFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
define FUZZ_LINK
$(FUZZ_OUT)/$(1): $(FUZZ_OUT)/harness/$(1).o $(patsubst %,$(FUZZ_OUT)/obj/%.o,$(FUZZ_SRCS_$(1)))
	$(FUZZ_CXX) $(FUZZ_SAN) -fsanitize=fuzzer $$^ $(FUZZ_LIBS_$(1)) -o $$@
endef
$(foreach t,$(FUZZ_TARGETS),$(eval $(call FUZZ_LINK,$(t))))

fuzz-bin: $(addprefix $(FUZZ_OUT)/,$(FUZZ_TARGETS))
# What each fuzz target is compiled from, for the bench's per-target
# freshness (bench/jankbench/fuzz_rows.py): "TARGET|OBJECTS|LIBS" a line,
# then "flags|COMPILER AND FLAGS".
fuzz-srcs:
	@$(foreach t,$(FUZZ_TARGETS),echo '$(t)|$(FUZZ_SRCS_$(t))|$(FUZZ_LIBS_$(t))';)
	@echo 'flags|$(FUZZ_CXX) $(FUZZ_CXXFLAGS)'
fuzz: fuzz-bin
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh run $(FUZZ_TARGETS)
# Part of `make test`: every target a few seconds from its seeds, so a
# parser change that crashes on them fails the tests.
fuzz-smoke: fuzz-bin
	FUZZ_JOBS=$$(nproc) scripts/fuzz.sh smoke $(FUZZ_TARGETS)

# Not part of `make test`. scripts/bench.sh installs the bench-only
# packages itself, and the bench builds what it measures from this tree
# (all apps unit-bin, fuzz-bin for the fuzzers: bench/jankbench/builds.py);
# a full run refuses a tree with uncommitted changes.
bench: deps
	scripts/bench.sh

vmlinux:
	scripts/gen-vmlinux.sh $(ARCH)

$(OUTPUT) $(OUTPUT)/obj $(OUTPUT)/unit $(OUTPUT)/tests:
	mkdir -p $@

# --- BPF: object -> linked object -> skeleton ---------------------------
$(OUTPUT)/%.tmp.bpf.o: bpf/%.bpf.c $(VMLINUX) $(wildcard include/jankbpf/*.h bpf/*.h bpf/compat/asm/*.h) | $(OUTPUT)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(OUTPUT)/%.bpf.o: $(OUTPUT)/%.tmp.bpf.o
	$(BPFTOOL) gen object $@ $<

$(OUTPUT)/%.skel.h: $(OUTPUT)/%.bpf.o
	$(BPFTOOL) gen skeleton $< > $@

# --- userspace ------------------------------------------------------------
# The version string lives in a header rewritten only when it changes, so
# --version always tells the commit built, without rebuilding everything.
$(OUTPUT)/version.h: FORCE | $(OUTPUT)
	@echo '#define JANKBPF_VERSION "$(VERSION)"' > $@.tmp
	@cmp -s $@.tmp $@ && rm $@.tmp || mv $@.tmp $@

$(OUTPUT)/obj/%.o: src/%.cpp $(BPF_SKELS) | $(OUTPUT)/obj $(OUTPUT)/version.h
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@

# CPPFLAGS and LDFLAGS: empty here, Debian's hardening flags in `make deb`.
# The HTML report's page, style and script, embedded as string_views.
REPORT_ASSETS := $(sort $(wildcard src/report/assets/*))
$(OUTPUT)/report_assets.h: $(REPORT_ASSETS) scripts/embed-assets.sh | $(OUTPUT)
	scripts/embed-assets.sh $@ $(REPORT_ASSETS)
$(OUTPUT)/obj/report/html.o: $(OUTPUT)/report_assets.h

$(OUTPUT)/jankbpf: $(OBJS) $(MAIN_OBJ)
	$(CXX) $(CXXFLAGS) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(OUTPUT)/unit/%.o: tests/unit/%.cpp $(BPF_SKELS) | $(OUTPUT)/unit $(OUTPUT)/version.h
	$(CXX) $(CXXFLAGS) -c $< -o $@

$(OUTPUT)/jankbpf-unit: $(UNIT_OBJS) $(OBJS)
	$(CXX) $(CXXFLAGS) $^ $(LDLIBS) -o $@

# Purpose-built targets: -O2 without frame pointers, as binaries ship.
$(OUTPUT)/tests/%: tests/apps/%.c | $(OUTPUT)/tests
	$(CC) $(APP_CFLAGS) $< -o $@ -lm

# GLib main-loop targets: on the system's GLib, and (glib_loop_sdt) also
# carrying GLib's SDT probe definitions (sys/sdt.h), for the USDT path.
GLIB_CFLAGS = $(shell $(PKG_CONFIG) --cflags glib-2.0)
GLIB_LIBS = $(shell $(PKG_CONFIG) --libs glib-2.0)
$(OUTPUT)/tests/glib_loop: tests/apps/glib_loop.c | $(OUTPUT)/tests
	$(CC) $(APP_CFLAGS) $(GLIB_CFLAGS) $< -o $@ $(GLIB_LIBS) -lm
$(OUTPUT)/tests/glib_loop_sdt: tests/apps/glib_loop.c | $(OUTPUT)/tests
	$(CC) $(APP_CFLAGS) -DGLIB_SDT $(GLIB_CFLAGS) $< -o $@ $(GLIB_LIBS) -lm
# arm64 pointer authentication (PAC-signed return addresses) and BTI.
$(OUTPUT)/tests/getppid: bench/getppid.c | $(OUTPUT)/tests
	$(CC) $(APP_CFLAGS) $< -o $@
$(OUTPUT)/tests/taxbench: bench/taxbench.c | $(OUTPUT)/tests
	$(CC) $(APP_CFLAGS) -pthread $< -o $@

# Static: each of its thousands of execs a second skips the dynamic loader.
$(OUTPUT)/tests/exec_storm: tests/apps/exec_storm.c | $(OUTPUT)/tests
	$(CC) $(APP_CFLAGS) -static $< -o $@

# Static: the executable-note attack (issue 26) patches a copy of it, and
# its attacks run as nobody from directories of their own.
$(OUTPUT)/tests/hostile_budget: tests/apps/hostile_budget.c | $(OUTPUT)/tests
	$(CC) $(APP_CFLAGS) -static $< -o $@

# Freestanding i386: no i386 libc can be installed beside the arm64 cross
# compiler (gcc-multilib removes it); clang and GNU ld build it alone.
$(OUTPUT)/tests/loop32: tests/apps/ia32/loop32.c | $(OUTPUT)/tests
	$(CLANG) -m32 -O2 -g -Wall -ffreestanding -fno-pic -fno-stack-protector -nostdlib -static $< -o $@

# The Wayland client: xdg-shell and presentation-time from wayland-protocols,
# their glue generated by wayland-scanner into $(OUTPUT)/wl.
WL_PROTOCOLS := /usr/share/wayland-protocols/stable
WL_XML := xdg-shell/xdg-shell presentation-time/presentation-time
WL_GEN := $(foreach x,$(notdir $(WL_XML)),$(OUTPUT)/wl/$(x)-client-protocol.h $(OUTPUT)/wl/$(x)-protocol.c)
$(OUTPUT)/wl/%-client-protocol.h: | $(OUTPUT)
	@mkdir -p $(dir $@)
	wayland-scanner client-header $(firstword $(wildcard $(WL_PROTOCOLS)/*/$*.xml)) $@
$(OUTPUT)/wl/%-protocol.c: | $(OUTPUT)
	@mkdir -p $(dir $@)
	wayland-scanner private-code $(firstword $(wildcard $(WL_PROTOCOLS)/*/$*.xml)) $@
$(OUTPUT)/tests/wl_frames: tests/apps/wayland/wl_frames.c $(WL_GEN) | $(OUTPUT)/tests
	$(CC) $(APP_CFLAGS) -I$(OUTPUT)/wl $< $(filter %.c,$(WL_GEN)) -o $@ -lwayland-client

$(OUTPUT)/tests/stack_loop_pac: tests/apps/stack_loop.c | $(OUTPUT)/tests
	$(CC) $(APP_CFLAGS) -mbranch-protection=standard $< -o $@ -lm

clean:
	rm -rf build

# (build/arm64 lives inside build: its dependency files are its own; so
# are build/deb's, the package build's copy of the tree; build/kernel-lane
# holds unpacked Debian packages.) -mindepth 1: OUTPUT itself is never
# pruned, or an arm64 build (OUTPUT=build/arm64) would read none of its own.
-include $(shell find $(OUTPUT) -mindepth 1 \( -path build/arm64 -o -path build/deb -o -path build/kernel-lane \) -prune -o -type f -name '*.d' -print 2>/dev/null)
