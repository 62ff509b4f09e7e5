#!/usr/bin/env bash
# `make run`: runs the manager (bin/manager) against the cluster of $KUBECONFIG or ~/.kube/config when one answers;
# when none does, starts the local cluster (test/cmd/localcluster) in the background first. Installs the CRD either
# way. Extra manager flags: make run ARGS="--requeue-after=10s".
# NODE=real (make run NODE=real): starts the cluster with a real node (make cluster-up NODE=real) and runs the
# manager inside its network namespace, the only place its API server answers (hack/realnode.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

# kubectl of the local cluster's version, built with the other control-plane binaries (once).
tools=$(test/tools/install.sh)
export PATH="$tools:$PATH"

if [ "${NODE:-kwok}" = real ]; then
  go build -o bin/localcluster ./test/cmd/localcluster
  bin/localcluster up real
  kubeconfig=$(bin/localcluster kubeconfig real)
  echo
  echo "In another terminal, use it through hack/realnode.sh (it enters the cluster's network namespace):"
  echo "  hack/realnode.sh kubectl create -f - <<<'{\"apiVersion\":\"example.com/v2\",\"kind\":\"WebApp\",\"metadata\":{\"name\":\"web\"},\"spec\":{\"image\":\"webapp-test/webserver:1\",\"ports\":[{\"name\":\"http\",\"port\":8080}]}}'"
  echo "  (v2 only: the CRD here has no conversion webhook; no image can be pulled: only the ones cluster-up built are there, webapp-test/webserver:1 among them)"
  echo "  hack/realnode.sh kubectl get webapp,pods,svc; hack/realnode.sh curl -s http://CLUSTER-IP:PORT/"
  echo
  hack/realnode.sh kubectl apply --server-side -f manifests/crd/example.com_webapps.yaml
  hack/realnode.sh kubectl wait --for=condition=Established --timeout=60s crd/webapps.example.com >/dev/null
  echo "starting the manager in the cluster's namespace (Ctrl-C stops it; 'make cluster-down NODE=real' stops the cluster)"
  exec hack/realnode.sh bin/manager --kubeconfig="$kubeconfig" --webhook-port=0 "$@"
fi

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

if ! kubectl get crd webapps.example.com >/dev/null 2>&1; then
  # The CRD with conversion by the operator's Service: v1 requests need the deployed operator (make deploy).
  kubectl apply --server-side -k manifests/crd
fi
kubectl wait --for=condition=Established --timeout=60s crd/webapps.example.com >/dev/null
echo "starting the manager (Ctrl-C stops it; 'make cluster-down' stops a local cluster)"
# The manager on a workstation serves no conversion webhook (the API server could not call it): the local cluster
# serves it, or the deployed operator does.
exec bin/manager --kubeconfig="${KUBECONFIG:-$HOME/.kube/config}" --webhook-port=0 "$@"
