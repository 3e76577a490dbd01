# Upgrades this node's kubeadm-managed parts to the version the cluster
# was applied at: kubeadm upgrade node. On a control-plane node
# (.ControlPlane) its static pods, with certificates left to up (as
# upgrade/apply); on a worker its kubelet configuration.
kubeadm upgrade node{{if .ControlPlane}} --certificate-renewal=false{{end}}{{with .IgnorePreflight}} --ignore-preflight-errors={{q .}}{{end}}
