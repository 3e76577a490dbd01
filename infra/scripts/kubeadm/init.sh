# Bootstraps a new cluster on this node from the init config .Config
# (kubeadm init), then marks the node set up (.Marker): a later read tells
# a finished init from an interrupted one by it. The token and the
# certificate key stay out of the output, which the run keeps on the
# node. Prints kubeadm's output; exits with its status.
kubeadm init --config {{q .Config}} --skip-token-print --skip-certificate-key-print{{with .IgnorePreflight}} --ignore-preflight-errors={{q .}}{{end}}
touch {{q .Marker}}
