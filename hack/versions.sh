#!/usr/bin/env bash
# make verify: the operator's module, and Traefik's (test/tools/traefik), select the same version as the tools module
# (test/tools) of every library whose packages both build. Then make test compiles those packages (Kubernetes'
# client libraries, most of all) once for the suites, the control plane, helm, promtool, Prometheus and Traefik; one
# newer patch of a library deep down (golang.org/x/net, say) on one side recompiles every package above it on the
# other, minutes on a cold machine.
#
# It prints each library built at two versions, and the command that aligns them; the libraries below are allowed
# to differ, each for its reason. (metrics-server's module, test/tools/metrics-server, keeps the Kubernetes libraries
# of its release: built against the tools module's, its APIService never became Available on the real node.)
set -euo pipefail
cd "$(dirname "$0")/.."

# Allowed: MODULE_DIR PATH_PREFIX REASON.
allowed=(
  ". sigs.k8s.io/gateway-api Traefik implements the Gateway API release it pins; the tests' client may be newer"
  "test/tools/traefik go.opentelemetry.io/ Traefik's OpenTelemetry log API is v0.x; Prometheus requires v1"
  "test/tools/traefik github.com/grpc-ecosystem/grpc-gateway/v2 its newer releases require OpenTelemetry's log API v1"
)

# built DIR PATTERN...: "path version" of every module (not the main one) whose packages the builds of PATTERN
# compile in DIR, a replacement's version where one applies.
built() {
  (cd "$1" && shift && go list -deps -test -f '{{with .Module}}{{if not .Main}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}{{end}}' "$@") | sort -u
}

tools=$(built test/tools tool)
failed=0
# check DIR PATTERN...: DIR's builds against the tools module's.
check() {
  local dir=$1 differ a
  shift
  differ=$(join <(built "$dir" "$@") <(echo "$tools") | awk '$2 != $3')
  for a in "${allowed[@]}"; do
    read -r d p _ <<<"$a"
    if [ "$d" = "$dir" ]; then differ=$(echo "$differ" | awk -v p="$p" 'index($1, p) != 1'); fi
  done
  [ -n "$differ" ] || return 0
  failed=1
  echo "$dir/go.mod and test/tools/go.mod select different versions of libraries both build:" >&2
  echo "$differ" | awk -v d="$dir" '{printf "  %s: %s in %s/go.mod, %s in test/tools/go.mod\n", $1, $2, d, $3}' >&2
  echo "align them (the newer of each), e.g.:" >&2
  echo "$differ" | while read -r p x y; do
    if [ "$(printf '%s\n%s\n' "$x" "$y" | sort -V | tail -n 1)" = "$y" ]; then echo "  (cd $dir && go get $p@$y && go mod tidy)"; else
      echo "  (cd test/tools && go get $p@$x && go mod tidy)"; fi
  done >&2
}
check . ./...
check test/tools/traefik tool
[ "$failed" = 0 ] || exit 1
echo "go.mod and test/tools/traefik/go.mod select test/tools/go.mod's version of each library they share with it"
