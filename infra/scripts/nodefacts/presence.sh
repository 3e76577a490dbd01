# Prints "present=PATH" for each of .Traces on the node (kubeadm's
# leftovers among them), for roles/nodefacts.ParsePresence. Read-only.
{{- range .Traces}}
if {{template "nodefacts/trace" .}}; then echo present={{q .Path}}; fi
{{- end}}
