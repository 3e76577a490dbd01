# Reads, read-only, the packages .Names as dpkg knows them: one line
# "pkg=NAME STATUS VERSION" each (a package dpkg never saw prints
# nothing), after gpu/detect's lines when .GPU is set (toolkit packages
# are installed only where a GPU shows).
{{- if .GPU}}
{{template "gpu/detect" .GPU}}
{{- end}}
dpkg-query -W -f='pkg=${Package} ${db:Status-Abbrev} ${Version}\n' {{qs .Names}} 2>/dev/null || true
