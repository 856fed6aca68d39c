# jankbpf build, in the libbpf-bootstrap manner: one build folder,
#   clang -target bpf -> bpftool gen object -> bpftool gen skeleton,
# userspace objects depending on the skeletons they include.
#
#   make                 build/jankbpf (native)
#   make ARCH=arm64      build/arm64/jankbpf, cross-built with aarch64-linux-gnu
#   make deps            install missing Debian packages (ARCH=arm64 adds the cross set)
#   make run             deps + build + run jankbpf system-wide (root)
#   make test            deps + build + unit tests + end-to-end tests (root)
#   make bench           benchmarks, rewrites bench/RESULTS.md
#   make vmlinux         regenerate bpf/vmlinux/$(ARCH)/vmlinux.h

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

.PHONY: all deps run test unit e2e arm64-check bench vmlinux clean apps FORCE
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
	@$(MAKE) --no-print-directory all unit-bin apps
	@$(MAKE) --no-print-directory unit e2e arm64-check

# Both architectures from day one: the arm64 cross-build must build and its
# pure-logic unit tests pass under qemu-aarch64 (x86_64 hosts only).
arm64-check:
ifeq ($(HOST_ARCH),x86)
	@scripts/install-deps.sh arm64
	timeout 1800 scripts/check-arm64.sh --unit
endif

unit-bin: $(OUTPUT)/jankbpf-unit
apps: $(APPS)

unit: $(OUTPUT)/jankbpf-unit
	$(OUTPUT)/jankbpf-unit

e2e: $(OUTPUT)/jankbpf $(APPS)
	JANKBPF_BUILD=$(abspath $(OUTPUT)) /usr/bin/python3 -m pytest -v -p no:cacheprovider tests/e2e

# Not part of `make test`: it reports, it does not judge. scripts/bench.sh
# installs the bench-only packages itself; unit-bin carries the stack
# library's own [stack-bench] case.
bench: deps
	@$(MAKE) --no-print-directory all apps unit-bin
	JANKBPF_BUILD=$(abspath $(OUTPUT)) scripts/bench.sh

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
	$(CXX) $(CXXFLAGS) -c $< -o $@

$(OUTPUT)/jankbpf: $(OBJS) $(MAIN_OBJ)
	$(CXX) $(CXXFLAGS) $^ $(LDLIBS) -o $@

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

clean:
	rm -rf build

# (build/arm64 lives inside build: its dependency files are its own.)
-include $(shell find $(OUTPUT) -path build/arm64 -prune -o -name '*.d' -print 2>/dev/null)
