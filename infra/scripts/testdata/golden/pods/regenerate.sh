# homelab: pods/regenerate
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Writes the static pod .Name's manifest again with kubeadm (phase
# .Phase) and waits until the kubelet runs the new one: a new manifest is
# no restart yet, and the next node's must not begin while this one's is
# pending, or every apiserver restarts at once.
# Defines await_new PATTERN NAME OLD: waits until a process matching
# PATTERN runs whose PIDs are not OLD (the kubelet started the static pod
# again), for at most 300 s. pgrep finding nothing is an answer (not yet),
# not a failure.
await_new() {
	i=0
	while :; do
		new=$({ pgrep -f "$1" || true; } | tr '\n' ' ')
		if [ -n "$new" ] && [ "$new" != "$3" ]; then return 0; fi
		i=$((i + 1))
		if [ "$i" -ge 300 ]; then
			echo "$2 did not come back within 300 s of its restart" >&2
			return 1
		fi
		sleep 1
	done
}

old=$({ pgrep -f '^([^ ]*/)?kube-apiserver( |$)' || true; } | tr '\n' ' ')
kubeadm init phase control-plane 'apiserver' --config '/etc/kubernetes/kubeadm/init.yaml'
await_new '^([^ ]*/)?kube-apiserver( |$)' 'kube-apiserver' "$old"
