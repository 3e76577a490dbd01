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
	for h in {{q .CertsD}}/*/hosts.toml; do
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
awk '$1 == "cgroupDriver:" { print "kubelet.cgroupDriver=" $2 }' {{q .KubeletConfig}} 2>/dev/null || true
{{template "nodefacts/live" .Live}}
