# A KubeadmJoin's Read in one session: the node's membership (first line:
# yes, partial or no, nodefacts/state), "etcd-data=yes" when it holds an
# etcd member's data (which resetting a partial control-plane node would
# lose), then its kubelet's client credentials (nodefacts/kubeletclient).
# Read-only.
{{template "nodefacts/state" .State}}
if {{template "nodefacts/trace" .EtcdData}}; then echo etcd-data=yes; fi
{{template "nodefacts/kubeletclient" .KubeletClient}}
