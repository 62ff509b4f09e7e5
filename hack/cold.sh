#!/usr/bin/env bash
# A newcomer's first run, reproduced: a clean clone of HEAD, an empty HOME (no Go module, build, tools or image
# cache: everything `make test` keeps outside the checkout lives under it), the machine's Go settings kept (GOENV:
# they are configuration, not a cache), then `make test` (or, with -C, CI's `.ci/run`) pinned to CPUS of the
# machine's cores with taskset, which every process it starts inherits (Go's GOMAXPROCS reads it too): a machine of
# CPUS cores. Prints make test's table and the whole run's wall time.
#
# Usage: hack/cold.sh [-c CPUS] [-r] [-C] [-k]
#   -c CPUS  how many cores (default 1: half of a 2-core machine)
#   -r       remove the Debian packages the real node installs first (test/tools/install-node-packages.sh installs
#            them again during the run, as on a new machine); needs root
#   -C       run .ci/run (CI=true: make verify, make lint, make test and the Dockerfile's check) instead of make test
#   -k       keep the clone and its HOME (else removed at the end; they hold several GiB)
# The log is written to the clone's parent directory (printed at the start).
set -euo pipefail
cd "$(dirname "$0")/.."
cpus=1 remove=0 ci=0 keep=0
while getopts 'c:rCk' o; do
  case "$o" in
  c) cpus=$OPTARG ;;
  r) remove=1 ;;
  C) ci=1 ;;
  k) keep=1 ;;
  *) sed -n '9,15p' "$0" >&2; exit 2 ;;
  esac
done
[ "$cpus" -ge 1 ] && [ "$cpus" -le "$(nproc)" ] || { echo "cold.sh: -c takes 1 to $(nproc)" >&2; exit 2; }
top=$(mktemp -d /tmp/webapp-cold.XXXXXX)
log=$top/run.log
echo "cold.sh: clone, HOME and log in $top; $cpus of $(nproc) cores"
git clone -q . "$top/src"
mkdir -p "$top/home/.config/go"
# The machine's Go settings (module proxy, toolchain, flags), without which a new HOME would not be this machine's.
goenv=$(go env GOENV)
[ ! -f "$goenv" ] || cp "$goenv" "$top/home/.config/go/env"
if [ "$remove" = 1 ]; then
  echo "cold.sh: removing the real node's Debian packages"
  DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq docker.io containerd runc containernetworking-plugins busybox-static >/dev/null
fi
cleanup() { [ "$keep" = 1 ] || { chmod -R u+w "$top" 2>/dev/null; rm -rf "$top/src" "$top/home"; }; }
trap cleanup EXIT
cmd=(make test)
[ "$ci" = 0 ] || cmd=(bash .ci/run)
start=$(date +%s)
rc=0
# Only what a new shell of a new user would have: no GOPATH, GOCACHE or cache directories of this session's.
(cd "$top/src" && env -u GOPATH -u GOCACHE -u GOMODCACHE -u XDG_CACHE_HOME -u WEBAPP_TOOLS_CACHE -u KUBEBUILDER_ASSETS \
  HOME="$top/home" CI="$([ "$ci" = 1 ] && echo true || echo "")" taskset -c "0-$((cpus - 1))" "${cmd[@]}") >"$log" 2>&1 || rc=$?
secs=$(($(date +%s) - start))
sed -n '/=== make test: what each phase took/,$p' "$log"
printf 'cold.sh: %s on %d core(s) from cold: exit %d after %d min %d s (log: %s)\n' "${cmd[*]}" "$cpus" "$rc" $((secs / 60)) $((secs % 60)) "$log"
exit "$rc"
