# homelab: clusterlock/take
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Takes the cluster lock .Dir on this node for the run .ID, its holder
# record (JSON) on stdin. mkdir is the atomic step: of two runs racing,
# one makes the directory. With .Break, another run's lock is replaced.
# Prints "taken", "ours" (this run holds it already), "broken" or "held",
# the last two followed by the holder record found.
d='/var/lib/homelab/cluster.lock'
id='0123456789abcdef'
umask 077
mkdir -p "${d%/*}"
if mkdir "$d" 2>/dev/null; then
	cat > "$d/holder.json"
	echo taken
	exit 0
fi
held=$(cat "$d/holder.json" 2>/dev/null || true)
case $held in
*"\"id\":\"$id\""*)
	echo ours
	exit 0
	;;
esac
echo held
printf '%s\n' "$held"
