# Prints the ClusterConfiguration kubeadm keeps in the kubeadm-config
# ConfigMap (its kubernetesVersion is the version the cluster was last
# applied at). Fails when the API does not answer.
{{.Kubectl}} -n kube-system get configmap kubeadm-config -o jsonpath='{.data.ClusterConfiguration}'
