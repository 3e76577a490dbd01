# homelab: upgrade/prune-snapshots
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Removes all but the newest .Keep pre-upgrade snapshots in .Dir (by
# modification time: the target version leads the name), printing the
# names removed. The scheduled snapshots, named otherwise, have their own
# retention. A missing .Dir has none to remove.
cd '/var/lib/homelab/etcd-snapshots' 2>/dev/null || exit 0
# The names are the product's own (before-upgrade-VERSION-TIME.db): no
# newline in them, which is what makes ls's lines safe to read.
# shellcheck disable=SC2012
ls -1t before-upgrade-*.db 2>/dev/null | tail -n +4 | while IFS= read -r f; do
	rm -f -- "$f" && echo "$f"
done
