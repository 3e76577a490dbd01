# Removes all but the newest .Keep pre-upgrade snapshots in .Dir (by
# modification time: the target version leads the name), printing the
# names removed. The scheduled snapshots, named otherwise, have their own
# retention. A missing .Dir has none to remove.
cd {{q .Dir}} 2>/dev/null || exit 0
# The names are the product's own (before-upgrade-VERSION-TIME.db): no
# newline in them, which is what makes ls's lines safe to read.
# shellcheck disable=SC2012
ls -1t before-upgrade-*.db 2>/dev/null | tail -n +{{.From}} | while IFS= read -r f; do
	rm -f -- "$f" && echo "$f"
done
