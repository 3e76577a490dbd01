# Lists the scheduled etcd snapshots in .Dir, one "MTIME NAME" line each
# (MTIME in seconds since the epoch by the node's clock), only names that
# match .Pattern: what etcdsnapshot.ParseListing reads. A node without
# the directory lists nothing.
if [ -d {{q .Dir}} ]; then
	for f in {{q .Dir}}/*; do
		name=${f##*/}
		if printf '%s\n' "$name" | grep -Eq {{q .Pattern}}; then
			echo "$(stat -c %Y "$f") $name"
		fi
	done
fi
