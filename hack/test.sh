#!/usr/bin/env bash
# make test: every suite, the fast ones first, and at the end a table of what each phase took.
#
#   modules         go mod download: everything below needs them
#   images          the real node's images (test/images/build.sh), in the background from here on: they need no
#                   control plane, and the suites below mostly wait on an API server, not on the CPU
#   unit            the packages that need no control plane: the first failure or success within minutes
#   control plane   test/tools/install.sh: etcd, kube-apiserver, ... and kwok, built once into the tools cache
#   local cluster   integration (a real API server), actions, chart, monitoring and end-to-end (kwok nodes)
#   real node       waits for the images, then test/realnode (root)
#
# WEBAPP_IMAGES_JOB=DIR: the images are built by a job started before (hack/images.sh start DIR, as .ci/run does);
# this waits for it instead of starting its own. TEST_TIMEOUT bounds each go test of the local-cluster suites.
set -euo pipefail
cd "$(dirname "$0")/.."
# Static and path-trimmed, as the Makefile builds (when this runs without it): the tools' and images' builds share
# the packages the suites compile.
export CGO_ENABLED=0
goflags=$(go env GOFLAGS)
case " $goflags " in *" -trimpath "*) ;; *) export GOFLAGS="${goflags:+$goflags }-trimpath" ;; esac
start=$(date +%s)
table=$(mktemp)
trap 'rm -f "$table"' EXIT

# phase NAME SECONDS RESULT: a row of the table.
phase() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$table"; }
now() { echo $(($(date +%s) - start)); }
say() { echo; echo "=== make test: $* ($(now)s)"; }

# print_table: the phases as they ended, the images' own figures, and the total.
print_table() {
  say "what each phase took"
  printf '%-44s %8s  %s\n' "phase" "seconds" "result"
  while IFS=$'\t' read -r name secs result; do printf '%-44s %8s  %s\n' "$name" "$secs" "$result"; done <"$table"
  printf '%-44s %8s\n' "total (wall clock)" "$(now)"
}

# cpu: "busy total" clock ticks of all CPUs since boot (/proc/stat); busy_since BEFORE: the share of the CPUs' time
# busy since then, "cpu N%" (a phase near 100% waits on the CPU: only less work makes it shorter; one far below it
# waits on something else, and work beside it is free).
cpu() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
busy_since() {
  local b0 t0 b1 t1
  read -r b0 t0 <<<"$1"
  read -r b1 t1 <<<"$(cpu)"
  if [ "$t1" -gt "$t0" ]; then echo "cpu $((100 * (b1 - b0) / (t1 - t0)))%"; else echo "cpu -"; fi
}

# run NAME COMMAND...: a phase in the foreground; its failure ends make test after the table.
failed=""
run() {
  local name=$1 t0 c0 rc=0
  shift
  say "$name"
  t0=$(date +%s)
  c0=$(cpu)
  "$@" || rc=$?
  if [ "$rc" = 0 ]; then phase "$name" $(($(date +%s) - t0)) "ok, $(busy_since "$c0")"; else
    phase "$name" $(($(date +%s) - t0)) "FAILED ($rc), $(busy_since "$c0")"
    failed="$failed $name;"
  fi
  return 0
}
finish() {
  print_table
  if [ -n "$failed" ]; then echo "make test FAILED:$failed"; exit 1; fi
  echo "make test passed"
}

run "modules (go mod download)" go mod download
[ -z "$failed" ] || finish

job=${WEBAPP_IMAGES_JOB:-}
if [ -z "$job" ]; then
  job=$(mktemp -d /tmp/webapp-images.XXXXXX)
  say "the real node's images: building in the background (log: $job/build.log)"
  hack/images.sh start "$job"
fi

unit_pkgs=$(go list ./apis/... ./controller/... ./conversion/... ./applyconfig/... .)
run "unit (no control plane)" go test -count=1 $unit_pkgs
say "the control plane (built once into the tools cache; the images build beside it)"
t0=$(date +%s)
c0=$(cpu)
if bin=$(test/tools/install.sh); then phase "control plane (test/tools/install.sh)" $(($(date +%s) - t0)) "ok, $(busy_since "$c0")"; else
  phase "control plane (test/tools/install.sh)" $(($(date +%s) - t0)) "FAILED, $(busy_since "$c0")"
  failed="$failed control plane;"
  finish
fi

# One go test for them all, so two packages run at once as go test runs them; each package's own time is read off
# its result line.
cluster_pkgs=$(go list ./... | grep -v -x -F -f <(echo "$unit_pkgs") | grep -v '/test/realnode$')
out=$(mktemp)
run "local cluster (integration, actions, chart, monitoring, e2e)" bash -o pipefail -c \
  'KUBEBUILDER_ASSETS="$1" WEBAPP_TOOLS_BIN="$2" go test -timeout "$3" -count=1 "${@:5}" 2>&1 | tee "$4"' \
  _ "${KUBEBUILDER_ASSETS:-$bin}" "$bin" "${TEST_TIMEOUT:-40m}" "$out" $cluster_pkgs
# "ok  	github.com/example/webapp-operator/test/e2e	79.926s" (a package with tests) or "FAIL	pkg	12.3s".
sed -nE 's#^(ok|FAIL)[[:space:]]+github.com/example/webapp-operator/([^[:space:]]+)[[:space:]]+([0-9]+)(\.[0-9]+)?s.*#  \2 (its own run)\t\3\t\1#p' "$out" >>"$table"
rm -f "$out"

say "the real node: waiting for the images (the last step done: $(grep '^images: ' "$job/build.log" 2>/dev/null | tail -n 1))"
t0=$(date +%s)
c0=$(cpu)
if hack/images.sh wait "$job"; then
  phase "waiting for the images after the suites" $(($(date +%s) - t0)) "ok, $(busy_since "$c0")"
  hack/images.sh table "$job" >>"$table"
  run "real node (test/realnode)" env WEBAPP_TOOLS_BIN="$bin" WEBAPP_REALNODE_IMAGES="$(paste -sd, "$job/images.txt")" \
    go test -timeout 60m -count=1 -v ./test/realnode
else
  phase "waiting for the images after the suites" $(($(date +%s) - t0)) FAILED
  hack/images.sh table "$job" >>"$table"
  tail -n 40 "$job/build.log"
  failed="$failed images;"
fi
if [ -z "${WEBAPP_IMAGES_JOB:-}" ]; then
  # Our own job: it ends (its last clean-up) before its directory goes.
  hack/images.sh finish "$job" >/dev/null 2>&1 || true
  rm -rf "$job"
fi
finish
