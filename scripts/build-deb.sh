#!/usr/bin/env bash
# Builds the Debian package with Debian's tools (dpkg-buildpackage, debhelper)
# from a copy of the tree, so the results land in build/deb/ and not beside
# the checkout, and a developer's build/ never leaks into the package; then
# runs lintian on it. Exit status: the build's, then lintian's (errors fail,
# warnings are printed).
#
#   scripts/build-deb.sh            # build/deb/jankbpf_VERSION_ARCH.deb
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/build/deb
src=$out/jankbpf

rm -rf "$out"
mkdir -p "$src"
# Tracked files and new ones not ignored: what a commit of this tree holds.
(cd "$root" && git ls-files -z --cached --others --exclude-standard) |
  (cd "$root" && xargs -0 cp --parents -t "$src" 2>/dev/null || true)
# git ls-files lists deleted-but-tracked files too; cp skips them above.
[[ -f $src/debian/rules ]] || { echo "build-deb: no debian/rules in the copy" >&2; exit 1; }

cd "$src"
# -b: binary only (a native package's source is this repository);
# -us -uc: nothing to sign here.
dpkg-buildpackage -b -us -uc -j"${JOBS:-2}" >"$out/build.log" 2>&1 || {
  tail -40 "$out/build.log" >&2
  echo "build-deb: dpkg-buildpackage failed; full log in $out/build.log" >&2
  exit 1
}
changes=$(ls "$out"/jankbpf_*.changes)
deb=$(ls "$out"/jankbpf_*_*.deb | grep -v dbgsym)
echo "build-deb: $deb ($(stat -c %s "$deb") bytes)"

# lintian: errors fail the build; warnings and info are shown.
lintian --fail-on error --display-info --tag-display-limit 0 "$changes" | tee "$out/lintian.log"
echo "build-deb: lintian passed ($(grep -c '^[EW]:' "$out/lintian.log" || true) errors+warnings listed above)"
