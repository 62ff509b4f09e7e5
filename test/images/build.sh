#!/usr/bin/env bash
# Builds the real node's images with no registry and writes them as image tarballs for containerd to import:
#   webapp-operator:dev           the operator: its manager compiled on the host as the Dockerfile compiles it, on the
#                                 stand-in of the Dockerfile's base (WEBAPP_CHECK_DOCKERFILE=1: the Dockerfile is built too,
#                                 and its manager must be the same bytes)
#   webapp-operator:before-v2     the operator of the last commit before API v2 (WEBAPP_UPGRADE_FROM), for the
#                                 upgrade test
#   webapp-test/webserver:1       the test web app (test/images/webserver), static, FROM scratch, non-root
#   webapp-test/webserver:2       the same, a second tag (a rollout to a new image)
#   webapp-test/metrics-server:1  metrics-server, built from its Go module (test/tools/metrics-server) on the
#                                 distroless stand-in, as its own image is
#   webapp-test/traefik:1         Traefik, the Gateway API implementation and Ingress controller of the exposure
#                                 tests, built from its Go module (test/tools/traefik) on the distroless stand-in
#   webapp-test/prometheus:1      Prometheus, built from its Go module (test/tools) with only the Kubernetes
#                                 service discovery, for the monitoring test
#   registry.k8s.io/pause:3.10    the pod sandbox (test/images/pause)
# No base image can be pulled here, so the Dockerfile's two base images are stand-ins made on this machine:
#   golang:1.26                       this machine's Go toolchain + busybox's shell + CA certificates
#   gcr.io/distroless/static:nonroot  /etc/passwd with nonroot (65532), CA certificates, /tmp: the distroless layout
# Real ones are never shadowed: a stand-in is made only in this script's own docker data root.
#
# dockerd runs only for the builds: no bridge, no iptables, no IP forwarding, its data root in the cache (so layers
# are reused), its exec root and socket in a temporary directory, in a mount namespace of its own; builds use the
# host network (the only thing they reach is the Go module proxy); it is stopped by PID at the end.
#
# Usage: test/images/build.sh OUTDIR     (prints OUTDIR's tarballs, one a line)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
cache=${WEBAPP_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/webapp-operator}
start=$(date +%s)
log() { echo "images: $* ($(( $(date +%s) - start ))s)" >&2; }

"$root/test/tools/install-node-packages.sh"
log "the Debian packages present"
# One build at a time: two dockerds must never share the data root.
mkdir -p "$cache"
exec 9>"$cache/docker.lock"
flock 9
tmp=$(mktemp -d /tmp/webapp-docker.XXXXXX)
export DOCKER_HOST="unix://$tmp/docker.sock" DOCKER_BUILDKIT=0
cgparent=webapp-image-build

# stop_dockerd: SIGTERM by PID, SIGKILL after 30 s; then remove its cgroups and the temporary directory.
stop_dockerd() {
  local pid
  pid=$(cat "$tmp/dockerd.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  for d in /sys/fs/cgroup/*/"$cgparent"; do
    if [ -d "$d" ]; then find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
  done
  rm -rf "$tmp"
}
trap stop_dockerd EXIT

# dockerd (20.10) writes /etc/docker/key.json, its containerd /run/containerd/s and /run/docker: in its own mount
# namespace, give it a private /etc/docker and an empty /run, so nothing of it stays on the machine.
mkdir -p "$tmp/etc-docker" "$cache/docker"
echo "{}" >"$tmp/daemon.json"
unshare --mount --propagation private sh -c '
  mount --bind "$1/etc-docker" /etc/docker
  mount -t tmpfs -o mode=755 tmpfs /run
  echo $$ >"$1/dockerd.pid"
  exec dockerd --data-root="$2" --exec-root="$1/exec" --host="unix://$1/docker.sock" --pidfile="$1/docker.pid" \
    --bridge=none --iptables=false --ip-forward=false --ip-masq=false --userland-proxy=false \
    --exec-opt native.cgroupdriver=cgroupfs --cgroup-parent="/$3" --config-file="$1/daemon.json"
' sh "$tmp" "$cache/docker" "$cgparent" >"$tmp/dockerd.log" 2>&1 &
for _ in $(seq 300); do docker version >/dev/null 2>&1 && break; sleep 0.1; done
docker version >/dev/null || { cat "$tmp/dockerd.log" >&2; exit 1; }
log "dockerd ready"

# standin NAME CHANGES... ROOTFS_TAR_COMMAND: import a rootfs as NAME unless this data root already has it.
standin() {
  local name=$1; shift
  docker image inspect "$name" >/dev/null 2>&1 && return 0
  log "making the stand-in $name"
  local rootfs="$tmp/rootfs-${name//[^a-z0-9]/-}"
  mkdir -p "$rootfs/etc/ssl/certs" "$rootfs/tmp"
  chmod 1777 "$rootfs/tmp"
  cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
  "$@" "$rootfs"
  local changes=()
  while read -r c; do changes+=(--change "$c"); done <"$rootfs.changes"
  tar -C "$rootfs" -c . | docker import "${changes[@]}" --message "stand-in made by test/images/build.sh" - "$name" >/dev/null
  rm -rf "$rootfs" "$rootfs.changes"
}

# golang_rootfs DIR: busybox as /bin/sh, this machine's Go as /usr/local/go, its module proxy settings.
golang_rootfs() {
  local goroot
  goroot=$(go env GOROOT)
  mkdir -p "$1/bin" "$1/usr/local" "$1/go"
  cp /bin/busybox "$1/bin/busybox"
  for a in sh mkdir cp mv rm ls cat env; do ln -s busybox "$1/bin/$a"; done
  cp -a "$goroot" "$1/usr/local/go"
  cat >"$1.changes" <<CHANGES
ENV PATH=/usr/local/go/bin:/go/bin:/bin
ENV GOPATH=/go
ENV GOTOOLCHAIN=local
ENV GOPROXY=$(go env GOPROXY)
ENV GOSUMDB=$(go env GOSUMDB)
WORKDIR /go
CHANGES
}

# distroless_rootfs DIR: the user and group nonroot (65532) and a home; no shell.
distroless_rootfs() {
  mkdir -p "$1/home/nonroot"
  chown 65532:65532 "$1/home/nonroot"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$1/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$1/etc/group"
  printf 'USER 65532:65532\nWORKDIR /home/nonroot\n' >"$1.changes"
}

standin golang:1.26 golang_rootfs
standin gcr.io/distroless/static:nonroot distroless_rootfs

# The test images: static binaries built here, copied FROM scratch.
for img in webserver pause; do
  mkdir -p "$tmp/ctx-$img"
  (cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/ctx-$img/$img" "./test/images/$img")
  cp "$here/$img/Dockerfile" "$tmp/ctx-$img/"
done
docker build -q --network=host -t webapp-test/webserver:1 "$tmp/ctx-webserver" >/dev/null
# The same app under a second tag: a rollout to a new image (the zero-failed-requests test).
docker tag webapp-test/webserver:1 webapp-test/webserver:2
docker build -q --network=host -t registry.k8s.io/pause:3.10 "$tmp/ctx-pause" >/dev/null
log "test images built"

# go_image IMAGE DIR PATH BUILDARGS...: `go build BUILDARGS` (static, trimmed) run in DIR, its binary at PATH in IMAGE,
# on the distroless stand-in.
go_image() {
  local image=$1 dir=$2 path=$3
  shift 3
  local ctx="$tmp/ctx-${image//[^a-z0-9]/-}"
  mkdir -p "$ctx"
  (cd "$dir" && GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath -o "$ctx/bin" "$@")
  printf 'FROM gcr.io/distroless/static:nonroot\nCOPY bin %s\nENTRYPOINT ["%s"]\n' "$path" "$path" >"$ctx/Dockerfile"
  docker build -q --network=host -t "$image" "$ctx" >/dev/null
  log "$image built"
}

# Traefik, at the version test/tools/traefik/go.mod pins, and Prometheus, at the one the tools module (test/tools)
# pins, each built in its module, whose libraries are the tools module's versions: the packages they share with the
# control plane's and the chart tests' builds are compiled once. Prometheus with the flags of promtool's build in
# test/monitoring (cluster.Tool), so the two share their compile too.
TRAEFIK_VERSION=$(cd "$root/test/tools/traefik" && go list -m -f '{{.Version}}' github.com/traefik/traefik/v3)
go_image webapp-test/traefik:1 "$root/test/tools/traefik" /traefik \
  -ldflags "-s -w -X github.com/traefik/traefik/v3/pkg/version.Version=$TRAEFIK_VERSION" github.com/traefik/traefik/v3/cmd/traefik
go_image webapp-test/prometheus:1 "$root/test/tools" /bin/prometheus \
  -tags remove_all_sd,enable_kubernetes_sd -ldflags "-s -w" github.com/prometheus/prometheus/cmd/prometheus

# The operator before v2 (the last commit without it), for the upgrade test: its manager built with this machine's
# Go from that commit's tree (the stand-in's user is nonroot, 65532), its libraries raised to the versions today's
# go.mod selects where those are newer: the same operator, its compile then mostly found in the build cache (a
# newer patch of golang.org/x/net alone recompiles every Kubernetes package above it). -mod=mod: the raised go.mod
# may need go.sum lines that neither go.sum has.
before=${WEBAPP_UPGRADE_FROM:-0e58b1c93562e0042664b93e630c7ab1b0a6e29b}
mkdir -p "$tmp/src-before"
git -C "$root" archive "$before" | tar -x -C "$tmp/src-before"
(
  cd "$tmp/src-before"
  modules() { go list -m -f '{{if not .Main}}{{.Path}} {{.Version}}{{end}}' all | sort; }
  raise=()
  while read -r path old new; do
    if [ "$(printf '%s\n%s\n' "$old" "$new" | sort -V | tail -n 1)" = "$new" ]; then raise+=("-require=$path@$new"); fi
  done < <(join <(modules) <(cd "$root" && modules) | awk '$2 != $3')
  if [ ${#raise[@]} -gt 0 ]; then go mod edit "${raise[@]}"; fi
  cat "$root/go.sum" >>go.sum
)
go_image webapp-operator:before-v2 "$tmp/src-before" /manager -mod=mod -ldflags "-s -w" .

# metrics-server, at the version test/tools/metrics-server/go.mod pins, for the real node's autoscaling test.
go_image webapp-test/metrics-server:1 "$root/test/tools/metrics-server" /metrics-server \
  -ldflags "-s -w" sigs.k8s.io/metrics-server/cmd/metrics-server

# The operator's image: the manager compiled here with the Dockerfile's own command (so the host's Go build cache
# serves it: a cold compile inside the build stage took 294 s), copied onto the distroless stand-in as the
# Dockerfile's last stage copies it. (-buildvcs=false: the build stage has no .git, so its binary has no VCS stamp.)
# Last of the compiles: by then make test has built bin/manager with the same flags and tags (its binaries phase
# ends long before the images above are compiled), so this is a link; built first, beside that phase, the same
# packages compiled twice at once (249 s of a cold two-core run, issue 48).
mkdir -p "$tmp/ctx-operator"
(cd "$root" && CGO_ENABLED=0 GOOS=linux go build -buildvcs=false -trimpath -tags=fieldsv1string -ldflags="-s -w" -o "$tmp/ctx-operator/manager" .)
printf 'FROM gcr.io/distroless/static:nonroot\nCOPY manager /manager\nUSER 65532:65532\nENTRYPOINT ["/manager"]\n' >"$tmp/ctx-operator/Dockerfile"
docker build -q --network=host -t webapp-operator:dev "$tmp/ctx-operator" >/dev/null
log "webapp-operator:dev built (the manager compiled on the host)"

for img in webapp-operator:dev webapp-operator:before-v2 webapp-test/webserver:1 webapp-test/webserver:2 webapp-test/metrics-server:1 webapp-test/traefik:1 webapp-test/prometheus:1 registry.k8s.io/pause:3.10; do
  file="$out/$(echo "$img" | tr '/:' '__').tar"
  docker save -o "$file" "$img"
  echo "$file"
done
log "images saved to $out"
# WEBAPP_IMAGES_READY=FILE: the tarballs are all there (the real node may start); what follows only checks.
if [ -n "${WEBAPP_IMAGES_READY:-}" ]; then : >"$WEBAPP_IMAGES_READY"; fi

# WEBAPP_CHECK_DOCKERFILE=1 (CI): the Dockerfile users build with still builds, and its manager is the very binary
# the real node tests run (Go's builds are reproducible: same toolchain, flags and sources, same bytes). Done after
# the images are saved: its compile (about 270 s on 2 cores when the sources changed) runs beside the real node's
# tests rather than before them.
if [ -n "${WEBAPP_CHECK_DOCKERFILE:-}" ]; then
  make -C "$root" --no-print-directory docker-build IMG=webapp-operator:dockerfile DOCKER_BUILD_ARGS="--network=host -q" >&2
  id=$(docker create webapp-operator:dockerfile)
  docker cp "$id:/manager" "$tmp/manager.dockerfile"
  docker rm "$id" >/dev/null
  if ! cmp -s "$tmp/manager.dockerfile" "$tmp/ctx-operator/manager"; then
    echo "images: the Dockerfile's manager is not the binary the real node tests run:" >&2
    go version -m "$tmp/manager.dockerfile" >&2
    go version -m "$tmp/ctx-operator/manager" >&2
    exit 1
  fi
  log "the Dockerfile builds the same manager ($(sha256sum <"$tmp/ctx-operator/manager" | cut -c1-12))"
fi

# Unused layers older than a week go; newer ones (the compile of the Dockerfile's build stage among them) stay as
# the cache of the next build.
docker image prune -f --filter until=168h >/dev/null
