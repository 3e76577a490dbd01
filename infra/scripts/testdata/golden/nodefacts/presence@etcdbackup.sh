# homelab: nodefacts/presence
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Prints "present=PATH" for each of .Traces on the node (kubeadm's
# leftovers among them), for roles/nodefacts.ParsePresence. Read-only.
if test -f '/etc/kubernetes/manifests/etcd.yaml'; then echo present='/etc/kubernetes/manifests/etcd.yaml'; fi
if test -f '/etc/kubernetes/manifests.homelab-restore/etcd.yaml'; then echo present='/etc/kubernetes/manifests.homelab-restore/etcd.yaml'; fi
if test -f '/etc/kubernetes/.homelab-init-complete'; then echo present='/etc/kubernetes/.homelab-init-complete'; fi
if test -f '/etc/kubernetes/.homelab-join-complete'; then echo present='/etc/kubernetes/.homelab-join-complete'; fi
if test -f '/etc/kubernetes/admin.conf'; then echo present='/etc/kubernetes/admin.conf'; fi
if test -d '/var/lib/etcd/member/wal'; then echo present='/var/lib/etcd/member/wal'; fi
if ls /etc/kubernetes/manifests/*.yaml >/dev/null 2>&1; then echo present='/etc/kubernetes/manifests/*.yaml'; fi
if test -f '/etc/kubernetes/kubelet.conf'; then echo present='/etc/kubernetes/kubelet.conf'; fi
if test -d '/var/lib/etcd/member'; then echo present='/var/lib/etcd/member'; fi
