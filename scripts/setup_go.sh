#!/usr/bin/env bash
# The Go part of scripts/setup.sh (the test command's; the demo needs no Go): the cluster suite
# builds its control plane from Go sources (tests/support/controlplane/build.py) with the one Go
# toolchain the project pins, in scripts/go-toolchain.txt.
#   1. A bootstrap `go`, any Go 1.21 or newer: the first of `go` on PATH, Go's own installer's
#      /usr/local/go, Debian's /usr/lib/go-1.N (the places build.py looks too). With none, as root
#      it installs Debian's newest golang-1.N-go (N >= 21), from the release's backports suite when
#      the release's own is older (bookworm's is 1.19); otherwise it says so in one sentence.
#   2. The pinned toolchain: the bootstrap run with GOTOOLCHAIN=<pin> fetches it from the Go module
#      proxy as a module into the module cache (GOMODCACHE), where every later build with the same
#      GOTOOLCHAIN finds it (build.py sets it on every go command).
# Exits 0 with `go version <pin>` proven, else 1 after one sentence naming what is missing.
# PADDLE_NBEXT_GO_SEARCH (tests): the places to look in besides PATH, default below.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/apt_get.sh
source scripts/apt_get.sh

PIN=$(tr -d '[:space:]' <scripts/go-toolchain.txt)
SEARCH=${PADDLE_NBEXT_GO_SEARCH-/usr/local/go/bin/go /usr/lib/go-1.*/bin/go}
say() { printf 'setup: %s\n' "$*" >&2; }

# The minor version of a Go command's own toolchain (GOTOOLCHAIN=local: no switch), or nothing.
go_minor() {
  local version
  version=$(GOTOOLCHAIN=local "$1" env GOVERSION 2>/dev/null) || return 0
  version=${version#go1.}
  printf '%s\n' "${version%%[!0-9]*}"
}

find_bootstrap() {
  local go minor
  # shellcheck disable=SC2086  # the search list is globs, newest Debian Go first
  for go in $(command -v go || true) $(printf '%s\n' $SEARCH | sort -rV); do
    [ -x "$go" ] || continue
    minor=$(go_minor "$go")
    if [ -n "$minor" ] && [ "$minor" -ge 21 ]; then
      printf '%s\n' "$go"
      return 0
    fi
  done
  return 1
}

# Debian's newest golang-1.N-go with N >= 21 that apt can install now, or nothing.  (No pipe
# ends early here: under pipefail a reader that stops first fails the writer with SIGPIPE.)
debian_go_package() {
  local names package minor best="" best_minor=0
  names=$(apt-cache pkgnames golang-1. 2>/dev/null || true)
  for package in $names; do
    [[ "$package" =~ ^golang-1\.([0-9]+)-go$ ]] || continue
    minor=${BASH_REMATCH[1]}
    if [ "$minor" -ge 21 ] && [ "$minor" -gt "$best_minor" ] && [[ "$(apt-cache policy "$package")" == *"Candidate: "[0-9]* ]]; then
      best=$package
      best_minor=$minor
    fi
  done
  printf '%s\n' "$best"
}

install_debian_go() {
  local codename uri package target=()
  codename=$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:-}")
  apt_get update -qq
  package=$(debian_go_package)
  if [ -z "$package" ] && [ -n "$codename" ]; then
    # The release's own Go is too old: add its backports suite, from the same mirror as the release.
    uri=$(apt-cache policy | awk -v suite="$codename/main" '$3 == suite && !uri { uri = $2 } END { print uri }')
    if [ -n "$uri" ]; then
      printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s-backports main\n' "$uri" "$codename" \
        >"/etc/apt/sources.list.d/$codename-backports.list"
      apt_get update -qq
      package=$(debian_go_package)
      target=(-t "$codename-backports")
    fi
  fi
  [ -n "$package" ] || return 1
  echo "setup: installing Debian's $package (bootstrap Go for $PIN)" >&2
  apt_get install -y -qq --no-install-recommends "${target[@]}" "$package" >/dev/null
}

if ! bootstrap=$(find_bootstrap); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    install_debian_go || true
  fi
  if ! bootstrap=$(find_bootstrap); then
    if [ "$(id -u)" = 0 ]; then
      say "Go is missing and Debian's golang-1.N-go (N >= 21) could not be installed (apt's words above): put a Go 1.21 or newer on PATH, then run \`bash scripts/setup.sh\` again."
    else
      say "Go is missing (the cluster tests build their control plane with $PIN, which any Go 1.21+ fetches): run \`bash scripts/setup.sh\` as root to install Debian's golang-1.N-go from backports, or put a Go 1.21 or newer on PATH."
    fi
    exit 1
  fi
fi

errors=$(mktemp)
trap 'rm -f "$errors"' EXIT
if ! version=$(GOTOOLCHAIN=$PIN "$bootstrap" version 2>"$errors") || [[ "$version" != "go version $PIN "* ]]; then
  say "$bootstrap could not fetch the pinned Go toolchain $PIN from the Go module proxy (GOPROXY, GOSUMDB): $(tr '\n' ' ' <"$errors")$version"
  exit 1
fi
echo "setup: Go ready: $PIN (GOTOOLCHAIN=$PIN, bootstrapped by $bootstrap)"
