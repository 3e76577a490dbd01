# Uploads the cluster configuration in .Config to the cluster's
# kubeadm-config ConfigMap, which later joins and kubeadm upgrades read.
# Prints kubeadm's output.
kubeadm init phase upload-config kubeadm --config {{q .Config}}
