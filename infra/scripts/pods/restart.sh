# Makes the kubelet restart each static pod in .Pods (its process ended,
# matched on the command line by .Pattern: a process name is cut to 15
# characters, so pkill -x kube-controller-manager matches nothing) and
# waits for a new process of it, one pod after the other.
{{template "pods/await-new" .}}
restart() {
	old=$({ pgrep -f "$1" || true; } | tr '\n' ' ')
	pkill -f "$1" || true
	await_new "$1" "$2" "$old"
}
{{- range .Pods}}
restart {{q .Pattern}} {{q .Name}}
{{- end}}
