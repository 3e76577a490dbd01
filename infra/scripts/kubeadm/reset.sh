# Resets a node that leaves the cluster (kubeadm reset): what kubeadm and
# homelab left on it goes (.Manifests, the kubeconfigs in .KubeDir, the
# completion markers .MarkerGlob, the detached runs .Runs, etcd's data
# directory .EtcdData, the kubelet's credentials .KubeletPKI) and its
# kubelet is stopped; etcd's member data is moved aside first. Past
# that, best effort: the node is out of the cluster's records already.
# Prints where etcd's data went, if anywhere.
#
# A failure moving the data aside stops the reset (set -e): kubeadm reset
# and the removal below would delete the data it failed to keep.
{{template "kubeadm/etcd-aside" . -}}
kubeadm reset -f --skip-phases=remove-etcd-member >/dev/null 2>&1 || true
systemctl stop kubelet >/dev/null 2>&1 || true
rm -rf {{q .Manifests}}/* {{q .KubeDir}}/*.conf {{.MarkerGlob}} {{q .Runs}} {{q .EtcdData}} {{q .KubeletPKI}} || true
