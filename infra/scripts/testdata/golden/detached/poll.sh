# homelab: detached/poll
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Tells how the detached run in .Dir (detached/start) stands. Prints
# "rc=N" followed by the run's output once it ended; "running"; "lost"
# when its process is gone without an exit code (the node rebooted under
# it); "starting" when its pid is not written yet. The exit status is not
# read.
# It first waits up to .Ticks fifths of a second for the run to end, so
# one SSH session covers seconds of a kubeadm run and the end is seen
# within a fifth of a second, where a poll a second answered late and
# cost a session each time. A lost run ends the wait at once.
d='/var/lib/homelab/runs/kubeadm-join'
i=0
while [ ! -f "$d/rc" ] && [ "$i" -lt 50 ]; do
	if [ -f "$d/pid" ] && ! kill -0 "$(cat "$d/pid")" 2>/dev/null; then
		break
	fi
	sleep 0.2
	i=$((i + 1))
done
if [ -f "$d/rc" ]; then
	echo "rc=$(cat "$d/rc")"
	cat "$d/out" 2>/dev/null
elif [ -f "$d/pid" ] && kill -0 "$(cat "$d/pid")" 2>/dev/null; then
	echo running
elif [ -f "$d/pid" ]; then
	echo lost
else
	echo starting
fi
