# Moves this node's etcd member data (.Member) to a new directory under
# .AsideDir before a kubeadm reset, which deletes etcd's data directory:
# the data is kept, never deleted. etcd is stopped first (its kubelet,
# then the process), so the copy is whole (a rename on one filesystem, a
# copy across two). Prints .AsidePrefix followed by where the data went;
# nothing when the node holds none. The reset scripts include it; its
# variable is a.
if [ -d {{q .Member}} ]; then
	systemctl stop kubelet >/dev/null 2>&1 || true
	pkill -f {{q .EtcdPattern}} || true
	for _ in $(seq 30); do pgrep -f {{q .EtcdPattern}} >/dev/null || break; sleep 1; done
	a={{q .AsideDir}}/$(date -u +%Y%m%dT%H%M%SZ)
	mkdir -p "$a"
	chmod 700 {{q .AsideDir}} "$a"
	mv {{q .Member}} "$a/"
	echo {{q .AsidePrefix}}"$a/member"
fi
