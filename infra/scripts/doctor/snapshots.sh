# What homelab doctor judges a node's scheduled snapshots by, read-only:
# the timer's state ("timer=active" when it runs), the node's clock
# ("now=SECONDS"), then the snapshots as etcd/snapshots lists them.
echo "timer=$(systemctl is-active {{q .Timer}} 2>/dev/null || true)"
echo "now=$(date +%s)"
{{template "etcd/snapshots" .}}
