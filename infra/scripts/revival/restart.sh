# Restarts the kubelet of a revived control-plane node, then each of its
# static pods (.Pods), so that all of them load the renewed certificates.
systemctl restart kubelet
{{template "pods/restart" .}}
