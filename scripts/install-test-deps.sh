#!/usr/bin/env bash
# What the report tests (tests/e2e/test_report.py) need beyond the build:
# a real browser (Debian's chromium, headless), protoc to decode Perfetto
# traces against Perfetto's schema (protobuf-compiler), redis-server for a
# real target, and speedscope (npm) as a second real reader of folded
# stacks, installed into build/test-deps; Debian's python3.11 for the
# Python-frames tests (tests/e2e/test_python_frames.py); Debian's OpenJDK 17
# (java and javac) for the Java-frames tests (tests/e2e/test_java_frames.py,
# the unit tests' live JVM: 115 MB from the mirror, 270 MB installed); weston,
# GTK 4 and PyGObject for the frame tests. Idempotent: a second run touches
# no network. Measured on the 2-vCPU test VM: chromium, protobuf-compiler and
# redis-server fetch 115 MB from the Debian mirror (377 MB installed);
# speedscope is 1.4 MB from npm, about 1 s.
#
#   scripts/install-test-deps.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}

pkgs=(chromium protobuf-compiler redis-server redis-tools python3.11 openjdk-17-jdk-headless
      # The frame tests (tests/e2e/test_frames.py): weston's headless
      # compositor and a GTK 4 app through Python (software rendering).
      weston python3-gi python3-gi-cairo gir1.2-gtk-4.0)
# npm comes with some nodejs builds (NodeSource); Debian packages it apart.
command -v npm >/dev/null || pkgs+=(npm)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -qx "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-test-deps: missing packages: ${missing[*]} (run as root to install them)" >&2
    exit 1
  fi
  echo "install-test-deps: installing ${missing[*]}" >&2
  . "$(dirname "$0")/apt-install.sh"
  apt_install "${missing[@]}"
fi

# speedscope's built web app (dist/release) from the npm package, pinned.
dir=$build/test-deps/speedscope
if [[ ! -f $dir/node_modules/speedscope/dist/release/index.html ]]; then
  echo "install-test-deps: installing speedscope (npm) into $dir" >&2
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error speedscope@1.25.0 >&2
fi
