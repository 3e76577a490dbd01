# Ends the static pod's process matching .Pattern, if it runs: the kubelet
# starts it again.
pkill -f {{q .Pattern}} || true
