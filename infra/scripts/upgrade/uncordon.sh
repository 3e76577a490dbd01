# Makes the Node .Node schedulable again once its kubelet runs at the
# target. Idempotent.
{{.Kubectl}} uncordon {{q .Node}}
