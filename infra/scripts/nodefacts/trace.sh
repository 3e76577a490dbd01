{{/*
One roles/nodefacts.Trace's test, to include in a condition (no newline
and no comment of its own): true when the trace is on the node, below
.Root (a test's tree; "" on a node). A glob stays unquoted: any match
counts.
*/ -}}
{{if .Glob}}ls {{with .Root}}{{q .}}{{end}}{{.Path}} >/dev/null 2>&1
{{- else}}test {{if .Dir}}-d{{else}}-f{{end}} {{with .Root}}{{q .}}{{end}}{{q .Path}}
{{- end -}}
