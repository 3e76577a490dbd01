# Renews the client certificate embedded in each kubeconfig of .Names in
# place, with the lifetime the kubeadm config .Config declares.
{{- range .Names}}
kubeadm certs renew {{q .}} --config {{q $.Config}}
{{- end}}
