# Prints what a node runs, for roles/nodefacts.ParseVersions:
# "image=COMPONENT REF" for each of .Manifests; the stamps and versions of
# .Tools (host/versions: a tool whose stamp .Known records is not run);
# "joined=yes" when the node's init or join completed (its marker: one
# holding kubeadm's files without it is an interrupted run, not a node to
# upgrade); its cgroup file system and whether its kubelet's
# configuration allows cgroup v1. One awk for the manifests, and no
# command substitution but a tool's first read: a shell forked per fact
# was most of what this cost (docs/benchmarks.md). Paths are read below
# .Root (a test's tree). Read-only.
r={{with .Root}}{{q .}}{{end}}
{{template "host/versions" .}}
set --
for f in {{qs .Manifests}}; do
	if [ -f "$r$f" ]; then set -- "$@" "$r$f"; fi
done
# A manifest replaced while awk reads (an upgrade) still leaves the others'.
[ $# -eq 0 ] || awk 'FNR == 1 { got = 0; c = FILENAME; sub(/.*\//, "", c); sub(/\.yaml$/, "", c) } !got && $1 == "image:" { print "image=" c " " $2; got = 1 }' "$@" || true
if [ -f "$r"{{q .InitMarker}} ] || [ -f "$r"{{q .JoinMarker}} ]; then echo joined=yes; fi
printf 'cgroupfs='
stat -fc %T /sys/fs/cgroup 2>/dev/null || echo
if grep -qE '^failCgroupV1:[[:space:]]*false' "$r"{{q .KubeletConfig}} 2>/dev/null; then echo failcgroupv1=false; fi
