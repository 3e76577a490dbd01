# Prints "holds" when this node holds the endpoint's address .VIP through
# keepalived (the address is on one of its interfaces and keepalived
# runs), nothing otherwise.
if ip -o addr show | grep -qw {{q .VIP}} && systemctl is-active keepalived >/dev/null; then
	echo holds
fi
