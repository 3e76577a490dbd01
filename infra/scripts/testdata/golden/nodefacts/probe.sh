# homelab: nodefacts/probe
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Prints what a node's own configuration says, for
# roles/nodefacts.ParseProbe: each of .Files that exists whole
# ("file=PATH", then its lines), and the server of every kubeconfig in
# .KubernetesDir ("kubeconfig=PATH URL"; first a line without one, which
# awk's, when it finds a server, follows and overrides). No key and no
# kubeconfig's credentials leave the node. No process per file: process
# creation is most of a refresh's cost (docs/benchmarks.md). Paths are
# read below .Root (a test's tree). Read-only.
r=
# Defines two functions that print a file with the shell's own read, no
# forked cat, sed or base64 (a process per file was most of a refresh's
# cost, docs/benchmarks.md). "lines KEY FILE" prints each line as
# KEY=LINE; "certlines KEY FILE" only its certificate blocks, so a key kept
# beside them never leaves the node. A missing file prints nothing.
# roles/nodefacts.Lines reads either back. Both return 0, so a script
# under set -e goes on.
lines() {
	[ -f "$2" ] || return 0
	while IFS= read -r l || [ -n "$l" ]; do
		printf '%s=%s\n' "$1" "$l"
	done < "$2"
}
certlines() {
	[ -f "$2" ] || return 0
	c=
	while IFS= read -r l || [ -n "$l" ]; do
		case $l in "-----BEGIN CERTIFICATE-----") c=1 ;; esac
		if [ -n "$c" ]; then printf '%s=%s\n' "$1" "$l"; fi
		case $l in "-----END CERTIFICATE-----") c= ;; esac
	done < "$2"
}

for f in '/etc/kubernetes/manifests/etcd.yaml' '/etc/kubernetes/manifests/kube-apiserver.yaml' '/etc/kubernetes/manifests/kube-controller-manager.yaml' '/etc/kubernetes/manifests/kube-scheduler.yaml' '/var/lib/kubelet/kubeadm-flags.env' '/etc/kubernetes/pki/apiserver.crt' '/etc/kubernetes/pki/etcd/server.crt' '/etc/kubernetes/pki/etcd/peer.crt'; do
	if [ -f "$r$f" ]; then
		printf 'file=%s \n' "$f"
		lines "line $f" "$r$f"
	fi
done
set --
for p in "$r"'/etc/kubernetes'/*.conf; do
	if [ -f "$p" ]; then
		echo "kubeconfig=${p#"$r"} "
		set -- "$@" "$p"
	fi
done
# A kubeconfig gone before awk reads it still leaves the others'.
[ $# -eq 0 ] || awk -v n=${#r} 'FNR == 1 { got = 0 } !got && $1 == "server:" { print "kubeconfig=" substr(FILENAME, n + 1) " " $2; got = 1 }' "$@" || true
