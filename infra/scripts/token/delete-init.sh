# Deletes every bootstrap token: run right after a new cluster's init, it
# removes the one kubeadm init mints for itself, which nothing here uses
# (every join brings its own). Prints nothing.
{{.Kubectl}} -n kube-system delete secrets --field-selector type={{q .Type}} >/dev/null
