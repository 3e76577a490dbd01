# Prints what a node's own configuration says, for
# roles/nodefacts.ParseProbe: each of .Files that exists whole
# ("file=PATH", then its lines), and the server of every kubeconfig in
# .KubernetesDir ("kubeconfig=PATH URL"; first a line without one, which
# awk's, when it finds a server, follows and overrides). No key and no
# kubeconfig's credentials leave the node. No process per file: process
# creation is most of a refresh's cost (docs/benchmarks.md). Paths are
# read below .Root (a test's tree). Read-only.
r={{with .Root}}{{q .}}{{end}}
{{template "nodefacts/lines"}}
for f in {{qs .Files}}; do
	if [ -f "$r$f" ]; then
		printf 'file=%s \n' "$f"
		lines "line $f" "$r$f"
	fi
done
set --
for p in "$r"{{q .KubernetesDir}}/*.conf; do
	if [ -f "$p" ]; then
		echo "kubeconfig=${p#"$r"} "
		set -- "$@" "$p"
	fi
done
# A kubeconfig gone before awk reads it still leaves the others'.
[ $# -eq 0 ] || awk -v n=${#r} 'FNR == 1 { got = 0 } !got && $1 == "server:" { print "kubeconfig=" substr(FILENAME, n + 1) " " $2; got = 1 }' "$@" || true
