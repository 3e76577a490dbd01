# Upgrades the cluster's control plane to .Target on the first
# control-plane node: kubeadm upgrade apply. Certificates are not renewed
# here: up renews them (cluster.certificates), when it decides to.
kubeadm upgrade apply {{q .Target}} --yes --certificate-renewal=false{{with .IgnorePreflight}} --ignore-preflight-errors={{q .}}{{end}}
