# Writes the static pod .Name's manifest again with kubeadm (phase
# .Phase) and waits until the kubelet runs the new one: a new manifest is
# no restart yet, and the next node's must not begin while this one's is
# pending, or every apiserver restarts at once.
{{template "pods/await-new" .}}
old=$({ pgrep -f {{q .Pattern}} || true; } | tr '\n' ' ')
kubeadm init phase control-plane {{q .Phase}} --config {{q .Config}}
await_new {{q .Pattern}} {{q .Name}} "$old"
