# Sourced by the install scripts: apt_install PKG... installs Debian
# packages, waiting for another apt or dpkg run (a package manager started
# at boot, or a second install script of the same make) instead of failing.
# apt's DPkg::Lock::Timeout covers dpkg's lock but not the package lists'
# lock, so `apt-get update` is retried while that one is held.
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  local tries=0 err
  until err=$(apt-get -q update 2>&1 >/dev/null); do
    if [[ $err != *"Could not get lock"* ]] || ((++tries > 90)); then
      echo "$err" >&2
      echo "apt_install: apt-get update failed" >&2
      return 1
    fi
    sleep 10
  done
  apt-get -q -o DPkg::Lock::Timeout=900 install -y --no-install-recommends "$@"
}
