#!/usr/bin/env bash
# make test: every suite, the fast ones first, each as soon as what it needs is built, and at the end a table of what
# each phase took and how busy the CPUs were meanwhile.
#
#   modules         go mod download: everything below needs them
#   images          the real node's images (test/images/build.sh), in the background from here on, at a lower CPU
#                   priority: they need no control plane
#   unit            the packages that need no control plane: the first failure or success within minutes
#   control plane   test/tools/install.sh, in two steps: etcd, kube-apiserver and kubectl, then the rest (built once
#                   into the tools cache)
#   binaries        before each suite starts, everything it runs: bin/manager (make build, as make run and the
#                   images build it), the tools module's commands (test/cmd/tools: helm, kustomize, promtool) and the
#                   suite's own test binaries; a suite's clock never includes a compile
#   integration     (a real API server) in the background from the first step on: it waits on its API server far
#                   more than on the CPU, so the rest of the control plane and the images compile beside it
#   local cluster   actions, chart, monitoring and end-to-end (kwok nodes), in the background from the second step
#   real node       test/realnode (root), in the background as soon as the images are there
# Each background suite's output is printed whole when it ends; a line a minute says what is still running.
# The suites run with WEBAPP_NO_BUILD=1 and hack/nobuild first on their PATH: a go build that compiles or links, a
# module download, or a tool missing from the cache fails the test that asked for it (the class of a newcomer's
# first run that failed after 51 minutes: `make run`'s compile inside a test's 4-minute wait).
#
# WEBAPP_IMAGES_JOB=DIR: the images are built by a job started before (hack/images.sh start DIR, as .ci/run does);
# this waits for it instead of starting its own. TEST_TIMEOUT bounds each go test of the kwok-tier suites.
set -euo pipefail
cd "$(dirname "$0")/.."
# Static and path-trimmed, as the Makefile builds (when this runs without it): the tools' and images' builds share
# the packages the suites compile.
export CGO_ENABLED=0
goflags=$(go env GOFLAGS)
case " $goflags " in *" -trimpath "*) ;; *) export GOFLAGS="${goflags:+$goflags }-trimpath" ;; esac
start=$(date +%s)
table=$(mktemp)
suites=$(mktemp -d /tmp/webapp-suites.XXXXXX)
own_job=""
# cleanup: the temporary files; our own image job (not one CI started) ends, its last clean-up included, before its
# directory goes: after the table, which does not wait for it.
cleanup() {
  rm -f "$table"
  rm -rf "$suites"
  if [ -n "$own_job" ]; then
    if [ -z "${interrupted:-}" ]; then
      if [ ! -s "$own_job/rc" ]; then echo "(waiting for the image build to end before removing $own_job)"; fi
      hack/images.sh finish "$own_job" >/dev/null 2>&1 || true
    else
      # Interrupted: the image build is stopped, not waited for.
      hack/images.sh stop "$own_job" >/dev/null 2>&1 || true
    fi
    rm -rf "$own_job"
  fi
}
trap cleanup EXIT

# phase NAME SECONDS RESULT: a row of the table.
phase() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$table"; }
now() { echo $(($(date +%s) - start)); }
say() { echo; echo "=== make test: $* ($(now)s)"; }

# print_table: the phases as they ended, the images' own figures, and the total.
print_table() {
  say "what each phase took"
  printf '%-64s %8s  %s\n' "phase" "seconds" "result"
  while IFS=$'\t' read -r name secs result; do printf '%-64s %8s  %s\n' "$name" "$secs" "$result"; done <"$table"
  printf '%-64s %8s\n' "total (wall clock)" "$(now)"
  # The machine it was measured on, to scale the figures to another: the cores this run may use (taskset) of all.
  echo "machine: $(nproc) of $(nproc --all) cores ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), $(free -g | awk '/^Mem:/{print $2}') GiB"
}

# cpu: "busy total" clock ticks of all CPUs since boot (/proc/stat); busy_since BEFORE: the share of the CPUs' time
# busy since then and the CPU-seconds it was, "cpu N%, M CPU-s" (a phase near 100% waits on the CPU: only less work
# makes it shorter; one far below it waits on something else, and work beside it is free). Both count the cores
# this run may use (its affinity: make test-cold pins it to one), and what else ran on them beside a phase too.
cores=$(awk '/^Cpus_allowed_list:/{n = split($2, r, ","); for (i = 1; i <= n; i++) { m = split(r[i], b, "-"); for (c = b[1]; c <= b[m]; c++) printf "cpu%d ", c }}' /proc/self/status)
cpu() { awk -v cores=" $cores" 'index(cores, " " $1 " ") {b += $2+$3+$4+$7+$8+$9; t += $2+$3+$4+$5+$6+$7+$8+$9} END {print b, t}' /proc/stat; }
busy_since() {
  local b0 t0 b1 t1
  read -r b0 t0 <<<"$1"
  read -r b1 t1 <<<"$(cpu)"
  # /proc/stat counts in USER_HZ ticks (getconf CLK_TCK, 100 on Linux): CPU-seconds of those cores, what a phase
  # would take on one core, to scale to a machine of other cores.
  if [ "$t1" -gt "$t0" ]; then echo "cpu $((100 * (b1 - b0) / (t1 - t0)))%, $(((b1 - b0) / $(getconf CLK_TCK))) CPU-s"; else echo "cpu -"; fi
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
# run_ok NAME COMMAND...: run, and succeed when that phase did (the ones before it may have failed).
run_ok() {
  local before=$failed
  run "$@"
  [ "$failed" = "$before" ]
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
  own_job=$job
  say "the real node's images: building in the background (log: $job/build.log)"
  hack/images.sh start "$job"
fi

unit_pkgs=$(go list ./apis/... ./controller/... ./conversion/... ./applyconfig/... ./hack/nobuild ./plugin/... ./cmd/... .)
run "unit (no control plane)" go test -count=1 $unit_pkgs
# install NAME BINARY...: a phase that builds control-plane binaries into the tools cache (test/tools/install.sh);
# sets bin. Its failure ends make test once the suites already started have ended.
install() {
  local name=$1 t0 c0
  shift
  say "$name"
  t0=$(date +%s)
  c0=$(cpu)
  if bin=$(${beside:-} test/tools/install.sh "$@"); then phase "$name" $(($(date +%s) - t0)) "ok, $(busy_since "$c0")"; return 0; fi
  phase "$name" $(($(date +%s) - t0)) "FAILED, $(busy_since "$c0")"
  failed="$failed $name;"
  return 1
}

# The suites past the unit tests run in the background, each as soon as what it needs is there, since they mostly
# wait on API servers and kubelets, not on the CPU: the compile still going on beside them takes what they leave.
# Each one's output is printed whole when it ends.
running=()
# spawn NAME COMMAND...: a suite in the background, in a session of its own (so an interrupt stops all of it).
spawn() {
  local name=$1 slug=${1//[^a-z0-9]/-}
  shift
  say "$name: started in the background"
  echo "$name" >"$suites/$slug.name"
  date +%s >"$suites/$slug.start"
  cpu >"$suites/$slug.cpu"
  setsid bash -c '"${@:3}" >"$1" 2>&1; echo $? >"$2"' _ "$suites/$slug.log" "$suites/$slug.rc" "$@" </dev/null &
  echo $! >"$suites/$slug.pid"
  running+=("$slug")
}
stop_suites() {
  local f
  for f in "$suites"/*.pid; do [ -e "$f" ] && kill -TERM -- "-$(cat "$f")" 2>/dev/null; done
  return 0
}
trap 'interrupted=1; stop_suites; exit 130' INT TERM

# reap: print and record each suite that has ended; keeps the others in running.
reap() {
  local slug name t0 rc result still=()
  for slug in "${running[@]}"; do
    if [ ! -s "$suites/$slug.rc" ]; then still+=("$slug"); continue; fi
    name=$(cat "$suites/$slug.name")
    t0=$(cat "$suites/$slug.start")
    rc=$(cat "$suites/$slug.rc")
    say "$name: ended ($rc), started at $((t0 - start))s; its output"
    cat "$suites/$slug.log"
    if [ "$rc" = 0 ]; then result="ok, $(busy_since "$(cat "$suites/$slug.cpu")")"; else
      result="FAILED ($rc), $(busy_since "$(cat "$suites/$slug.cpu")")"
      failed="$failed $name;"
    fi
    phase "$name (from $((t0 - start))s)" $(($(date +%s) - t0)) "$result"
    # "ok  	github.com/example/webapp-operator/test/e2e	79.926s" (a package with tests) or "FAIL	pkg	12.3s".
    sed -nE 's#^(ok|FAIL)[[:space:]]+github.com/example/webapp-operator/([^[:space:]]+)[[:space:]]+([0-9]+)(\.[0-9]+)?s.*#  \2 (its own run)\t\3\t\1#p' \
      "$suites/$slug.log" >>"$table"
  done
  running=("${still[@]}")
}
# still_running: one line on what is still running, and for how long.
still_running() {
  local slug list=""
  for slug in "${running[@]}"; do list="$list $(cat "$suites/$slug.name") ($(($(date +%s) - $(cat "$suites/$slug.start")))s);"; done
  echo "still running:${list:- nothing}"
}

# build_binaries [manager] [tools] PACKAGE...: the test binaries of these packages, compiled and linked into the
# suites' directory; with `manager`, first the manager (bin/manager, make build, as make run, the e2e tests and the
# images run it), with `tools` the tools module's commands the suites run (cluster.SuiteTools). go test then finds
# every package compiled and only links its test binary before its clock starts.
build_binaries() {
  if [ "$1" = manager ]; then
    shift
    ${beside:-} make --no-print-directory build
  fi
  if [ "$1" = tools ]; then
    shift
    ${beside:-} go run ./test/cmd/tools >/dev/null
  fi
  mkdir -p "$suites/bin"
  ${beside:-} go test -c -o "$suites/bin/" "$@"
}
# What every suite runs with: no build (hack/nobuild/go and cluster.Tool refuse one), no module download, the
# manager that build_binaries built.
suite_env=(env PATH="$PWD/hack/nobuild:$PATH" WEBAPP_REAL_GO="$(command -v go)" WEBAPP_NO_BUILD=1
  WEBAPP_MANAGER="$PWD/bin/manager" GOPROXY=off GOFLAGS="$GOFLAGS -mod=readonly")

# The integration tests need etcd, kube-apiserver and kubectl only: they start once those are built, and the rest
# of the control plane compiles while they wait on their API server.
timeout=${TEST_TIMEOUT:-40m}
if install "control plane for the integration tests (etcd, kube-apiserver, kubectl)" etcd kube-apiserver kubectl &&
  run_ok "binaries for the integration tests (the manager, the test binary)" build_binaries manager ./test/integration; then
  spawn "integration" "${suite_env[@]}" KUBEBUILDER_ASSETS="${KUBEBUILDER_ASSETS:-$bin}" WEBAPP_TOOLS_BIN="$bin" \
    go test -timeout "$timeout" -count=1 ./test/integration
  # From here on a suite runs while the builds go on: they yield the CPU to it (nice 10, as the images' build), so
  # its waits on the API server never wait on a compile's share of a core either.
  beside="nice -n 10"
  # One go test for the other local-cluster suites, so two packages run at once as go test runs them; each
  # package's own time is read off its result line.
  cluster_pkgs=$(go list ./... | grep -v -x -F -f <(echo "$unit_pkgs") | grep -v '/test/realnode$' | grep -v '/test/integration$')
  if install "the rest of the control plane (kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kwok)" &&
    run_ok "binaries for the local-cluster suites and the real node (helm, kustomize, promtool, test binaries)" build_binaries tools $cluster_pkgs ./test/realnode; then
    control_plane=built
    spawn "local cluster (actions, chart, monitoring, e2e)" "${suite_env[@]}" KUBEBUILDER_ASSETS="${KUBEBUILDER_ASSETS:-$bin}" \
      WEBAPP_TOOLS_BIN="$bin" go test -timeout "$timeout" -count=1 $cluster_pkgs
  fi
fi

# The real node once its images are there (and the control plane: kubelet, kube-proxy), beside the suites above;
# whatever else failed before.
if [ "${control_plane:-}" = built ]; then
  say "the real node: waiting for its images (the last step done: $(grep '^images: ' "$job/build.log" 2>/dev/null | tail -n 1))"
  t0=$(date +%s)
  c0=$(cpu)
  waited=0
  while [ ! -e "$job/ready" ] && [ ! -s "$job/rc" ]; do
    sleep 5
    waited=$((waited + 5))
    reap
    if [ $((waited % 60)) = 0 ]; then
      echo "$(still_running) the images: $(grep '^images: ' "$job/build.log" 2>/dev/null | tail -n 1)"
    fi
  done
  if hack/images.sh wait "$job"; then
    phase "waiting for the images" $(($(date +%s) - t0)) "ok, $(busy_since "$c0")"
    hack/images.sh table "$job" >>"$table"
    spawn "real node (test/realnode)" "${suite_env[@]}" WEBAPP_TOOLS_BIN="$bin" WEBAPP_REALNODE_IMAGES="$(paste -sd, "$job/images.txt")" \
      go test -timeout 60m -count=1 -v ./test/realnode
  else
    phase "waiting for the images" $(($(date +%s) - t0)) FAILED
    hack/images.sh table "$job" >>"$table"
    failed="$failed images;"
  fi
fi

# Every suite started ends before the table.
waited=0
while [ ${#running[@]} -gt 0 ]; do
  reap
  [ ${#running[@]} -gt 0 ] || break
  sleep 5
  waited=$((waited + 5))
  if [ $((waited % 60)) = 0 ]; then still_running; fi
done
finish
