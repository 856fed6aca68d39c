#!/usr/bin/env bash
# The unit tests as `make unit` (and so `make test`) runs them: on a machine
# as it comes, whatever an earlier suite or case mounted. As root, in a
# private mount namespace (nothing here reaches the machine's own mounts)
# where tracefs is unmounted first:
#   1. every case not tagged [tracefs], in one run; then tracefs must still
#      be unmounted there: a case that mounts it (and so may be what a later
#      case silently relies on) must be tagged [tracefs];
#   2. each [tracefs] case alone, in a fresh namespace of its own, tracefs
#      unmounted: each must find or mount tracefs itself, as jankbpf does.
# Not root: one plain run (the root-only cases skip, saying why).
#
#   scripts/run-unit.sh UNIT_BINARY [CATCH_OPTIONS...]   (options such as -s or
#   --order rand; not test specs, which would widen the selection)
set -uo pipefail

bin=${1:?usage: scripts/run-unit.sh UNIT_BINARY [CATCH_ARGS...]}
shift
# The x86_64-only cases (they capture this host's own stacks) do not apply
# to another host's arch.
not_x86=
[[ $(uname -m) == x86_64 ]] || not_x86="~[x86]"

if [[ $(id -u) -ne 0 ]]; then
  echo "unit: not root: one run, the cases that need root skip (CI=true fails them)" >&2
  exec "$bin" "~[.]$not_x86" "$@"
fi
if ! command -v unshare >/dev/null; then
  echo "unit: FAILED: unshare (util-linux) is missing: cannot give the unit tests a fresh mount namespace" >&2
  exit 1
fi

# In a private mount namespace: unmount every tracefs (the automount under
# debugfs too), then run the arguments.
fresh_ns() {
  unshare --mount --propagation private -- /bin/sh -c '
    for m in $(findmnt -rn -t tracefs -o TARGET | sort -r); do umount "$m" || exit 97; done
    "$@"' sh "$@"
}

# 1. Every case but the [tracefs] ones (and the hidden [.] ones, which a
# spec of exclusions alone would select), then: is tracefs still unmounted?
fresh_ns /bin/sh -c '
  "$@"; rc=$?
  if [ -n "$(findmnt -rn -t tracefs -o TARGET)" ]; then
    echo "unit: FAILED: a case not tagged [tracefs] mounted tracefs; tag it [tracefs] (scripts/run-unit.sh)" >&2
    exit 1
  fi
  exit $rc' sh "$bin" "~[.]~[tracefs]$not_x86" "$@"
rc=$?
[[ $rc -eq 97 ]] && echo "unit: FAILED: could not unmount tracefs in the private namespace" >&2
[[ $rc -eq 0 ]] || exit "$rc"

# 2. Each [tracefs] case alone, from a namespace with no tracefs. A name is
# a Catch test spec: its commas, brackets, stars and backslashes escaped.
mapfile -t names < <("$bin" --list-test-names-only "[tracefs]~[.]$not_x86" | sed '/^$/d')
if [[ ${#names[@]} -eq 0 ]]; then
  echo "unit: FAILED: no [tracefs] case found" >&2
  exit 1
fi
failed=0
for name in "${names[@]}"; do
  spec=$(printf '%s' "$name" | sed -e 's/\\/\\\\/g' -e 's/,/\\,/g' -e 's/\[/\\[/g' -e 's/\*/\\*/g')
  out=$(fresh_ns "$bin" "$spec" "$@" 2>&1)
  r=$?
  if [[ $r -ne 0 ]] || ! grep -q "All tests passed (.* in 1 test case)" <<<"$out"; then
    printf '%s\n' "$out"
    echo "unit: FAILED: [tracefs] case, alone with tracefs unmounted: $name" >&2
    failed=1
  fi
done
[[ $failed -eq 0 ]] && echo "unit: ${#names[@]} [tracefs] cases passed, each alone with tracefs unmounted" >&2
exit "$failed"
