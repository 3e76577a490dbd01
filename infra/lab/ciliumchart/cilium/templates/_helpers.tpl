{{/* kube-proxy-replacement as the chart writes it: "true" or "false". */}}
{{- define "cilium.kubeProxyReplacement" -}}
{{- $v := toString .Values.kubeProxyReplacement -}}
{{- if or (eq $v "true") (eq $v "false") -}}{{ $v }}{{- else -}}
{{- fail (printf "kubeProxyReplacement must be true or false, not %q" $v) -}}
{{- end -}}
{{- end -}}
