# homelab: vip/holds
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Prints "holds" when this node holds the endpoint's address .VIP through
# keepalived (the address is on one of its interfaces and keepalived
# runs), nothing otherwise.
if ip -o addr show | grep -qw '10.0.0.100' && systemctl is-active keepalived >/dev/null; then
	echo holds
fi
