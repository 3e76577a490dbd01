# kubeadm's own read-only check of the upgrade to .Target: it refuses a
# skipped minor, an unhealthy control plane or a version it cannot reach.
# .IgnorePreflight (comma-separated) are checks the user chose to skip.
kubeadm upgrade plan {{q .Target}}{{with .IgnorePreflight}} --ignore-preflight-errors={{q .}}{{end}}
