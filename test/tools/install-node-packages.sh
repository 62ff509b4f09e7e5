#!/usr/bin/env bash
# Installs the Debian packages the real node and the image builds use, when missing: docker.io (dockerd builds the
# images; it brings containerd and runc, which run the node's pods), the CNI plugins, iptables (kube-proxy) and
# busybox-static (the shell of the stand-in build image). Needs root and apt-get; prints nothing when all is there.
set -euo pipefail

need=()
have() { command -v "$1" >/dev/null 2>&1 || [ -x "$1" ]; }
have dockerd || need+=(docker.io)
have containerd || need+=(containerd)
have runc || need+=(runc)
have /usr/lib/cni/bridge || need+=(containernetworking-plugins)
have iptables || need+=(iptables)
have /bin/busybox || need+=(busybox-static)
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ] || ! have apt-get; then
  echo "the real node needs these Debian packages: ${need[*]} (install them as root, or run this script as root)" >&2
  exit 1
fi
echo "installing ${need[*]}" >&2
# Packages must not start their services (a dockerd with a bridge and iptables rules of its own): policy-rc.d
# refuses every start while we install, and goes again unless it was there before.
own_policy=
if [ ! -e /usr/sbin/policy-rc.d ]; then
  own_policy=1
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
fi
trap '[ -z "$own_policy" ] || rm -f /usr/sbin/policy-rc.d' EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
