# Gives the Node .Node its declared labels and taints: .Labels are
# kubectl label's arguments (key=value to set, key- to remove one the
# declaration dropped), .DropTaints the taints it dropped (key:effect-;
# one already gone is no failure), .Taints those to set. Prints kubectl's
# output; fails on the first label or taint that cannot be set.
{{- if .Labels}}
{{.Kubectl}} label node {{q .Node}} --overwrite {{qs .Labels}}
{{- end}}
{{- range .DropTaints}}
{{$.Kubectl}} taint node {{q $.Node}} {{q .}} || true
{{- end}}
{{- range .Taints}}
{{$.Kubectl}} taint node {{q $.Node}} --overwrite {{q .}}
{{- end}}
