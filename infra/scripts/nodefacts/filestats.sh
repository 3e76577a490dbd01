# Prints the modes and checksums of .Paths, for
# roles/nodefacts.ParseFileStats, in one command of three processes
# whatever their number (a shell, stat and sha256sum per file were most
# of a refresh's cost, docs/benchmarks.md): first the indexes of the paths
# that are regular files, then their modes, then their checksums. A path
# missing or not a regular file is left out. Read-only.
i=0
set --
for p in {{qs .Paths}}; do
	if [ -f "$p" ]; then set -- "$@" "$p"; printf '%s ' "$i"; fi
	i=$((i + 1))
done
echo
[ $# -eq 0 ] || { stat -c %a -- "$@" && sha256sum -- "$@"; }
