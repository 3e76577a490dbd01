# Resets a node that leaves the cluster (kubeadm reset): what kubeadm and
# homelab left on it goes (.Manifests, the kubeconfigs in .KubeDir, the
# completion markers .MarkerGlob, the detached runs .Runs, etcd's data
# directory .EtcdData, the kubelet's credentials .KubeletPKI) and its
# kubelet is stopped; etcd's member data is moved aside first. Best
# effort: the node is out of the cluster's records already, and nothing
# here fails its removal. Prints where etcd's data went, if anywhere.
#
# set -e does not apply inside a list left of ||: a failure moving the
# data aside does not stop the reset, as before scripts were files.
{
{{template "kubeadm/etcd-aside" . -}}
} || true
kubeadm reset -f --skip-phases=remove-etcd-member >/dev/null 2>&1 || true
systemctl stop kubelet >/dev/null 2>&1 || true
rm -rf {{q .Manifests}}/* {{q .KubeDir}}/*.conf {{.MarkerGlob}} {{q .Runs}} {{q .EtcdData}} {{q .KubeletPKI}} || true
