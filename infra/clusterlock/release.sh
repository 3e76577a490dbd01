# release.sh DIR ID: releases the cluster lock DIR on this node when the
# run ID holds it; another run's lock (it broke ours) is left alone.
set -eu
d=$1 id=$2
held=$(cat "$d/holder.json" 2>/dev/null || true)
case $held in
*"\"id\":\"$id\""*)
	rm -rf "$d"
	echo released
	;;
*) echo "not ours" ;;
esac
