#!/usr/bin/env bash
# Builds the local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok) and
# the real node's kubelet and kube-proxy from Go modules into a versioned cache directory outside the checkout, once.
# Prints that directory. (The real node's container runtime comes from Debian: test/tools/install-node-packages.sh.)
# Several callers at once take turns: the second finds the binaries the first built.
#
# Usage: test/tools/install.sh            build what is missing, print the bin directory
#        test/tools/install.sh BINARY...  only these (make test builds etcd, kube-apiserver and kubectl first: the
#                                         integration tests need no more, and start while the rest compiles)
#        WEBAPP_TOOLS_CACHE=/x test/tools/install.sh   cache somewhere else
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
K8S_VERSION=v1.37.2
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0 # as test/tools/go.mod pins it (the cache directory's name)
cache=${WEBAPP_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/webapp-operator}
bin="$cache/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION/bin"
mkdir -p "$bin"
# The tools module's binaries are built again when its go.mod or go.sum changes: BINARY.module holds the hash of
# the two it was built from.
module_hash=$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-12)
all=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy kwok)
wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=("${all[@]}")
for w in "${wanted[@]}"; do
  case " ${all[*]} " in *" $w "*) ;; *) echo "install.sh: no binary $w (there are: ${all[*]})" >&2; exit 2 ;; esac
done
# built NAME: NAME is in the cache, built from this go.mod of the tools module (etcd, from a module of its own,
# carries no stamp).
built() { [ -x "$bin/$1" ] && { [ "$1" = etcd ] || [ "$(cat "$bin/$1.module" 2>/dev/null)" = "$module_hash" ]; }; }
# Everything asked for is there: no lock, so a caller that needs kubectl alone (make run) does not wait for a build
# of the rest that another caller holds the lock for.
ready=1
for w in "${wanted[@]}"; do built "$w" || ready=0; done
if [ "$ready" = 1 ]; then
  echo "$bin"
  exit 0
fi
exec 8>"$bin/.install.lock"
flock 8
# want NAME: NAME is among the binaries asked for.
want() { case " ${wanted[*]} " in *" $1 "*) return 0 ;; esac; return 1; }

# Stamp the version into the Kubernetes binaries, or they report v0.0.0 and kubectl warns about skew.
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
kldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"

# build MODULE_DIR NAME PACKAGE LDFLAGS: build one binary unless the cache already has it.
build() {
  local dir=$1 name=$2 pkg=$3 ldflags=$4
  if [ -x "$bin/$name" ]; then return 0; fi
  echo "building $name ($pkg) into $bin" >&2
  (cd "$here/$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$bin/$name.tmp" "$pkg")
  mv "$bin/$name.tmp" "$bin/$name"
}

# build_kube LDFLAGS PACKAGE...: those of the binaries asked for that are missing or built from another go.mod of
# the tools module (test/tools), in one go build, which compiles their shared packages once and links one binary
# while it compiles for the next (one build per binary left a core idle through each link).
build_kube() {
  local ldflags=$1 missing=() pkgs=() tmpdir c p
  shift
  for p in "$@"; do
    c=${p##*/}
    want "$c" || continue
    if [ ! -x "$bin/$c" ] || [ "$(cat "$bin/$c.module" 2>/dev/null)" != "$module_hash" ]; then missing+=("$c"); pkgs+=("$p"); fi
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  echo "building ${missing[*]} into $bin" >&2
  tmpdir=$(mktemp -d "$bin/.build.XXXXXX")
  (cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmpdir/" "${pkgs[@]}") || { rm -rf "$tmpdir"; return 1; }
  for c in "${missing[@]}"; do
    mv "$tmpdir/$c" "$bin/$c"
    echo "$module_hash" >"$bin/$c.module"
  done
  rmdir "$tmpdir"
}

# The two modules build side by side: etcd's compile fills the gaps of the others' links. (kwok shares most of its
# packages with Kubernetes': built after them in the same module, it finds them compiled.)
etcd_pid=""
if want etcd; then
  build etcd etcd go.etcd.io/etcd/server/v3 "-s -w" &
  etcd_pid=$!
fi
# kwok after Kubernetes' binaries, without their version stamp.
kube_rc=0
{ build_kube "$kldflags" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl k8s.io/kubernetes/cmd/kubelet \
  k8s.io/kubernetes/cmd/kube-proxy &&
  build_kube "-s -w" sigs.k8s.io/kwok/cmd/kwok; } ||
  kube_rc=$?
# The stamps of the layout before (one for the whole module).
rm -f "$bin"/.kube-module-* "$bin"/.tools-module-*
etcd_rc=0
if [ -n "$etcd_pid" ]; then wait "$etcd_pid" || etcd_rc=$?; fi
if [ "$kube_rc$etcd_rc" != 00 ]; then
  echo "building the control plane failed (the tools module: $kube_rc, etcd $etcd_rc)" >&2
  exit 1
fi

echo "$bin"
