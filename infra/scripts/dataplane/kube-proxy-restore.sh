# Gives the cluster kube-proxy back (its DaemonSet and ConfigMap) from the
# kubeadm init config .Config, before Cilium's replacement is turned off.
kubeadm init phase addon kube-proxy --config {{q .Config}}
