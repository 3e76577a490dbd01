# homelab: kubeadm/join-read
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# A KubeadmJoin's Read in one session: the node's membership (first line:
# yes, partial or no, nodefacts/state), "etcd-data=yes" when it holds an
# etcd member's data (which resetting a partial control-plane node would
# lose), then its kubelet's client credentials (nodefacts/kubeletclient).
# Read-only.
# Prints yes when one of .Markers (alternatives: the node that ran init is
# as much a member as one that joined) and every one of .Files are on the
# node, partial when kubeadm left something behind (.Leftovers: an
# interrupted run), no otherwise. Read-only.
if {
	test -f '/etc/kubernetes/.homelab-join-complete' ||
	test -f '/etc/kubernetes/.homelab-init-complete'
} &&
	test -f '/etc/kubernetes/kubelet.conf' &&
	test -f '/etc/kubernetes/manifests/kube-apiserver.yaml' &&
	test -f '/etc/kubernetes/manifests/etcd.yaml'
then
	echo yes
elif
	ls /etc/kubernetes/manifests/*.yaml >/dev/null 2>&1 ||
	test -f '/etc/kubernetes/kubelet.conf' ||
	test -f '/etc/kubernetes/admin.conf' ||
	test -d '/var/lib/etcd/member'
then
	echo partial
else
	echo no
fi

if test -d '/var/lib/etcd/member/wal'; then echo etcd-data=yes; fi
# Prints how the kubelet authenticates to the API, for
# roles/nodefacts.ParseKubeletClient: kubelet.conf (its lines, or, when
# it embeds a key, the whole file base64 with every client-key-data value
# replaced by base64 of "redacted": "kubelet-conf="), the certificate
# blocks of the kubelet's rotating client certificate file and the
# cluster CA. No key leaves the node. The common case, a kubelet.conf
# that names its files, starts no process but the shell. Paths are read
# below .Root (a test's tree). Read-only.
r=
conf="$r"'/etc/kubernetes/kubelet.conf'
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

if [ -f "$conf" ]; then
	k=
	while IFS= read -r l || [ -n "$l" ]; do
		case $l in *client-key-data*) k=1 ;; esac
	done < "$conf"
	if [ -n "$k" ]; then
		echo "kubelet-conf=$(sed -E 's#(client-key-data"?[[:space:]]*:[[:space:]]*)["'"'"']?[A-Za-z0-9+/=]*["'"'"']?#\1"cmVkYWN0ZWQ="#' "$conf" | base64 -w0)"
	else
		echo kubelet-conf-file=yes
		lines kubelet-conf-line "$conf"
	fi
fi
certlines kubelet-current-line "$r"'/var/lib/kubelet/pki/kubelet-client-current.pem'
lines kubelet-ca-line "$r"'/etc/kubernetes/pki/ca.crt'

