# homelab: doctor/node
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Reads what doctor checks a node by, in one session: its hostname, MACs,
# addresses (secondary ones apart: the VIP is one, and must not pass for
# the node's own address; leased ones marked), neighbour table, the last bind failure in
# etcd's and the apiserver's logs, the container runtime's cgroup driver
# beside the kubelet's, then its configuration and its certificates' dates
# (nodefacts/live). Prints key=value lines.
# Read-only; every part goes on whatever an earlier part found.
echo "hostname=$(hostname)"
for i in /sys/class/net/*; do
	n=${i##*/}
	[ "$n" = lo ] && continue
	echo "mac=$(cat "$i/address")"
done
ip -o -4 addr show scope global 2>/dev/null | while read -r _ _ _ a rest; do
	case "$rest" in
	*secondary*) echo "secondary=${a%%/*}" ;;
	*) echo "addr=${a%%/*}" ;;
	esac
	# A lease's address has a lifetime ("dynamic"): whoever holds the
	# lease (networkd, dhclient, NetworkManager) may move it.
	case "$rest" in
	*dynamic*) echo "dynamic=${a%%/*}" ;;
	esac
done || true
ip -4 neigh show 2>/dev/null | awk '$4=="lladdr" && $6!="FAILED" && $6!="INCOMPLETE" {print "neigh=" $1 " " $5}' || true
for c in etcd kube-apiserver; do
	for l in /var/log/pods/"$c".log /var/log/pods/kube-system_"$c"-*/"$c"/*.log; do
		if [ -f "$l" ]; then
			tail -n 300 "$l" | grep -E 'bind: cannot assign requested address|listen tcp .*: bind' | tail -n 1 | sed "s|^|bind.$c=|" || true
		fi
	done
done
# The container runtime as it would start now (its configuration with
# defaults and imports merged), and the cgroup driver the kubelet was
# given: the two must agree. The dump is one base64 line.
# The dump is the files, not the running daemon: "containerd.stale=FILE"
# names a configuration file changed after containerd started, which it
# has not read (a unit without a start time, as systemd gives one, is not
# judged).
if command -v containerd >/dev/null 2>&1; then
	echo "containerd.version=$(containerd --version 2>/dev/null || true)"
	echo "containerd.dump=$(containerd config dump 2>/dev/null | base64 -w 0 || true)"
	# Each registry's mirrors as the product writes them, one base64 line
	# each: "containerd.hosts=REGISTRY DATA".
	for h in '/etc/containerd/certs.d'/*/hosts.toml; do
		[ -f "$h" ] || continue
		r=${h%/hosts.toml}
		echo "containerd.hosts=${r##*/} $(base64 -w 0 <"$h" || true)"
	done
	since=$(systemctl show -p ActiveEnterTimestamp --value containerd 2>/dev/null || true)
	if [ -n "$since" ] && started=$(date -d "$since" +%s 2>/dev/null); then
		for f in /etc/containerd/config.toml /etc/containerd/conf.d/*.toml; do
			[ -f "$f" ] || continue
			if [ "$(stat -c %Y "$f")" -gt "$started" ]; then
				echo "containerd.stale=$f"
			fi
		done
	fi
fi
awk '$1 == "cgroupDriver:" { print "kubelet.cgroupDriver=" $2 }' '/var/lib/kubelet/config.yaml' 2>/dev/null || true
# Reads a control-plane node's configuration (nodefacts/probe) and every
# certificate's end of validity (nodefacts/expiry) in one session.
# Read-only.
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

# Prints, for roles/nodefacts.ParseExpiry, "cert=PATH BASE64" for each of
# .Certs on the node (its first CERTIFICATE block's DER, never a key) and
# "kubeconfig-cert=PATH BASE64" for each kubeconfig's embedded
# client-certificate-data (never its key). One awk reads them all: a
# shell, sed and base64 per file were most of a refresh's cost
# (docs/benchmarks.md). Paths are read below .Root (a test's tree).
# Read-only.
r=
set --
for f in '/etc/kubernetes/pki/apiserver.crt' '/etc/kubernetes/pki/apiserver-kubelet-client.crt' '/etc/kubernetes/pki/apiserver-etcd-client.crt' '/etc/kubernetes/pki/front-proxy-client.crt' '/etc/kubernetes/pki/etcd/server.crt' '/etc/kubernetes/pki/etcd/peer.crt' '/etc/kubernetes/pki/etcd/healthcheck-client.crt' '/var/lib/kubelet/pki/kubelet-client-current.pem'; do
	if [ -f "$r$f" ]; then set -- "$@" "$r$f"; fi
done
for p in "$r"'/etc/kubernetes'/*.conf; do
	if [ -f "$p" ]; then set -- "$@" "$p"; fi
done
# A file gone before awk reads it (a renewal) still leaves the others'.
[ $# -eq 0 ] || awk -v n=${#r} '
FNR == 1 { got = 0; inb = 0; d = "" }
got { next }
FILENAME ~ /\.conf$/ { if ($1 == "client-certificate-data:") { print "kubeconfig-cert=" substr(FILENAME, n + 1) " " $2; got = 1 } next }
/-----BEGIN CERTIFICATE-----/ { inb = 1; next }
/-----END CERTIFICATE-----/ { if (inb) { print "cert=" substr(FILENAME, n + 1) " " d; got = 1 } next }
inb { d = d $0 }
' "$@" || true


