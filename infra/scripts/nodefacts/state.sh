# Prints yes when one of .Markers (alternatives: the node that ran init is
# as much a member as one that joined) and every one of .Files are on the
# node, partial when kubeadm left something behind (.Leftovers: an
# interrupted run), no otherwise. Read-only.
if {
{{- range $i, $m := .Markers}}{{if $i}} ||{{end}}
	{{template "nodefacts/trace" $m}}
{{- end}}
}{{range .Files}} &&
	{{template "nodefacts/trace" .}}
{{- end}}
then
	echo yes
elif
{{- range $i, $l := .Leftovers}}{{if $i}} ||{{end}}
	{{template "nodefacts/trace" $l}}
{{- end}}
then
	echo partial
else
	echo no
fi
