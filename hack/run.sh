#!/usr/bin/env bash
# `make run`: runs the manager (bin/manager) against the cluster of $KUBECONFIG or ~/.kube/config when one answers;
# when none does, starts the local cluster (test/cmd/localcluster) in the background first. Installs the CRD either
# way. On your own cluster the manager also serves the conversion webhook (v1 requests need it) at an address the
# API server reaches (WEBHOOK_HOST, WEBHOOK_PORT override it), and points the CRD at it until it stops.
# Extra manager flags: make run ARGS="--requeue-after=10s".
# NODE=real (make run NODE=real): starts the cluster with a real node (make cluster-up NODE=real) and runs the
# manager inside its network namespace, the only place its API server answers (hack/realnode.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

# wait_established KUBECTL...: the WebApp CRD Established, within a minute. Until the apiextensions controller sets
# a new CRD's first condition, its status.conditions is null, and kubectl wait (v1.37) fails at once on a null list
# instead of waiting: it is asked again until the deadline.
wait_established() {
  local deadline=$((SECONDS + 60))
  until "$@" wait --for=condition=Established --timeout=10s crd/webapps.example.com >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      "$@" wait --for=condition=Established --timeout=1s crd/webapps.example.com >/dev/null
      return
    fi
    sleep 1
  done
}

# kubectl of the local cluster's version, built with the other control-plane binaries (once); only kubectl here:
# a local cluster's start builds the rest it needs, and your own cluster needs none of it.
tools=$(test/tools/install.sh kubectl)
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
  wait_established hack/realnode.sh kubectl
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
  local_cluster=1
  echo
  echo "In another terminal, use it with kubectl (the same version is in $tools):"
  echo "  export KUBECONFIG=$KUBECONFIG PATH=$tools:\$PATH"
  echo "  kubectl apply --server-side -f manifests/examples/nginx-webapp.yaml"
  echo
fi

if ! kubectl get crd webapps.example.com >/dev/null 2>&1; then
  # The CRD as `make install` installs it (conversion by the deployed operator's Service).
  kubectl apply --server-side -k manifests/crd
fi
wait_established kubectl

if [ -n "${local_cluster:-}" ]; then
  echo "starting the manager (Ctrl-C stops it; 'make cluster-down' stops the local cluster)"
  # The local cluster serves conversion itself (test/cmd/localcluster).
  exec bin/manager --kubeconfig="$KUBECONFIG" --webhook-port=0 "$@"
fi

# Your cluster's API server calls the conversion webhook for every v1 request: this manager serves it, at an address
# of this machine that the API server reaches, and points the CRD's conversion there while it runs. On exit
# (Ctrl-C) it puts back what the CRD said before (kept meanwhile in the CRD's annotation
# webapp.example.com/conversion-before-local-run, so a run that was killed is put right by the next one).
webhook_host=${WEBHOOK_HOST:-}
if [ -z "$webhook_host" ]; then
  context=$(kubectl config current-context 2>/dev/null || true)
  server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  case "$context" in
    kind-*)
      # kind's nodes are containers on the docker network "kind": its gateway is this machine.
      webhook_host=$(docker network inspect kind -f '{{range .IPAM.Config}}{{.Gateway}} {{end}}' | tr ' ' '\n' | grep -m1 -E '^[0-9]+[.]' || true)
      ;;
    minikube) webhook_host=host.minikube.internal ;;
    docker-desktop) webhook_host=host.docker.internal ;;
    *)
      case "$server" in
        https://127.*|https://localhost[:/]*|https://localhost|https://\[::1\]*) webhook_host=127.0.0.1 ;;
      esac
      ;;
  esac
fi
if [ -z "$webhook_host" ]; then
  echo "cannot tell at which address the API server at $server (context ${context:-none}) reaches this machine;" >&2
  echo "set WEBHOOK_HOST to it (make run WEBHOOK_HOST=ADDRESS): v1 requests need the conversion webhook this manager serves" >&2
  exit 1
fi
case "$webhook_host" in *:*) webhook_host="[$webhook_host]" ;; esac  # an IPv6 address, in a URL
url="https://$webhook_host:${WEBHOOK_PORT:-9443}/convert"
echo "starting the manager, serving conversion at $url (Ctrl-C stops it and puts back the CRD's conversion)"
exec bin/manager --kubeconfig="${KUBECONFIG:-$HOME/.kube/config}" --webhook-url="$url" "$@"
