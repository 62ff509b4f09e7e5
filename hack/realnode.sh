#!/usr/bin/env bash
# Runs a command inside the network namespace of the cluster with a real node (`make cluster-up NODE=real`), the
# only place its API server, pods and Services answer, with the cluster's kubectl first on PATH and KUBECONFIG set:
#   hack/realnode.sh kubectl get nodes,pods -A
#   hack/realnode.sh curl -s http://CLUSTER-IP:PORT/
#   hack/realnode.sh make deploy          # the operator's image, built and imported by cluster-up
#   hack/realnode.sh bash                 # a shell in there
# Needs root (nsenter). Only the network namespace is entered: files and the working directory are the same.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ -x "$root/bin/localcluster" ] || (cd "$root" && go build -o bin/localcluster ./test/cmd/localcluster)
pid=$("$root/bin/localcluster" pid real)
kubeconfig=$("$root/bin/localcluster" kubeconfig real)
tools=$("$root/test/tools/install.sh")
exec nsenter --net="/proc/$pid/ns/net" -- env KUBECONFIG="$kubeconfig" PATH="$tools:$PATH" "$@"
