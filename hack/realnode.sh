#!/usr/bin/env bash
# Runs a command inside the network namespace of the cluster with a real node (`make cluster-up NODE=real`), the
# only place its API server, pods and Services answer, with the cluster's kubectl first on PATH and KUBECONFIG set:
#   hack/realnode.sh kubectl get nodes,pods -A
#   hack/realnode.sh curl -s http://CLUSTER-IP:PORT/
#   hack/realnode.sh make deploy          # the operator's image, built and imported by cluster-up
#   hack/realnode.sh bash                 # a shell in there
# Needs root (nsenter). The network namespace is entered, and a mount namespace of the command's own where
# /etc/resolv.conf is the node's (loopback only); files and the working directory are the same. `localcluster exec`
# refuses unless the recorded process is still the cluster's (its start time) and its namespace is not this one.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
(cd "$root" && go build -o bin/localcluster ./test/cmd/localcluster)
kubeconfig=$("$root/bin/localcluster" kubeconfig real)
tools=$("$root/test/tools/install.sh")
exec "$root/bin/localcluster" exec real -- env KUBECONFIG="$kubeconfig" PATH="$tools:$PATH" "$@"
