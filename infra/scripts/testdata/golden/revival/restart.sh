# homelab: revival/restart
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Restarts the kubelet of a revived control-plane node, then each of its
# static pods (.Pods), so that all of them load the renewed certificates.
systemctl restart kubelet
# Makes the kubelet restart each static pod in .Pods (its process ended,
# matched on the command line by .Pattern: a process name is cut to 15
# characters, so pkill -x kube-controller-manager matches nothing) and
# waits for a new process of it, one pod after the other.
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

restart() {
	old=$({ pgrep -f "$1" || true; } | tr '\n' ' ')
	pkill -f "$1" || true
	await_new "$1" "$2" "$old"
}
restart '^([^ ]*/)?kube-apiserver( |$)' 'kube-apiserver'
restart '^([^ ]*/)?kube-controller-manager( |$)' 'kube-controller-manager'
restart '^([^ ]*/)?kube-scheduler( |$)' 'kube-scheduler'

