# Takes the cluster lock .Dir on this node for the run .ID, its holder
# record (JSON) on stdin. mkdir is the atomic step: of two runs racing,
# one makes the directory. With .Break, another run's lock is replaced.
# Prints "taken", "ours" (this run holds it already), "broken" or "held",
# the last two followed by the holder record found.
d={{q .Dir}}
id={{q .ID}}
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
{{- if .Break}}
rm -rf "$d"
mkdir "$d"
cat > "$d/holder.json"
echo broken
printf '%s\n' "$held"
exit 0
{{- else}}
echo held
printf '%s\n' "$held"
{{- end}}
