#!/usr/bin/env bash
# `make run`: runs the manager (bin/manager) against the cluster of $KUBECONFIG or ~/.kube/config when one answers;
# when none does, starts the local cluster (test/cmd/localcluster) in the background first. Installs the CRD either
# way. Extra manager flags: make run ARGS="--requeue-after=10s".
set -euo pipefail
cd "$(dirname "$0")/.."

# kubectl of the local cluster's version, built with the other control-plane binaries (once).
tools=$(test/tools/install.sh)
export PATH="$tools:$PATH"

if kubectl get --raw=/readyz --request-timeout=5s >/dev/null 2>&1; then
  echo "using the cluster of your kubeconfig (context $(kubectl config current-context 2>/dev/null || echo none))"
else
  echo "no cluster answers on your kubeconfig; starting a local one"
  go build -o bin/localcluster ./test/cmd/localcluster
  bin/localcluster up
  KUBECONFIG=$(bin/localcluster kubeconfig)
  export KUBECONFIG
  echo
  echo "In another terminal, use it with kubectl (the same version is in $tools):"
  echo "  export KUBECONFIG=$KUBECONFIG PATH=$tools:\$PATH"
  echo "  kubectl apply --server-side -f manifests/examples/nginx-webapp.yaml"
  echo
fi

kubectl apply --server-side -f manifests/crd
kubectl wait --for=condition=Established --timeout=60s crd/webapps.example.com >/dev/null
echo "starting the manager (Ctrl-C stops it; 'make cluster-down' stops a local cluster)"
exec bin/manager --kubeconfig="${KUBECONFIG:-$HOME/.kube/config}" "$@"
