# Pulls the images kubeadm runs on a control-plane node (its static pods,
# the pause sandbox, CoreDNS, kube-proxy) as the cluster configuration in
# .Config names them, so the node's init or join finds them present.
# Prints kubeadm's output; exits with its status.
kubeadm config images pull --config {{q .Config}}
