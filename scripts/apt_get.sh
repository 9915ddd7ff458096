#!/usr/bin/env bash
# Sourced by scripts/setup.sh (and its test): `apt_get ARGS...`.
# apt-get, waiting for the package lock another apt run (unattended upgrades, a first-boot
# update) may hold instead of failing at once: dpkg's lock through apt's own timeout, the lists
# lock of `apt-get update` by retrying while apt says the lock is held.
APT_LOCK_WAIT=${APT_LOCK_WAIT:-600}
apt_get() {
  local waited=0 output
  while true; do
    if output=$(DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$APT_LOCK_WAIT" "$@" 2>&1); then
      return 0
    fi
    if ! grep -q "Could not get lock\|Unable to lock\|is held by process" <<<"$output" || [ "$waited" -ge "$APT_LOCK_WAIT" ]; then
      printf '%s\n' "$output" >&2
      return 1
    fi
    [ "$waited" = 0 ] && echo "setup: waiting for the Debian package lock (another apt is running)..." >&2
    sleep 5
    waited=$((waited + 5))
  done
}
