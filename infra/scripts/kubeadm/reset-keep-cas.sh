# Undoes an interrupted kubeadm init or join on this node so that it can
# run again, keeping the cluster's identity: kubeadm reset deletes the
# certificates directory (.PKI), and the CAs and service-account keys in
# it (.Identity) are the cluster's, or the retry would mint a new
# cluster; they wait in .Keep and are put back. etcd's data is moved
# aside first (kubeadm reset deletes it too). kubeadm's own removal of
# the node's etcd member is skipped: the step removed it before, checked
# against quorum. Prints where etcd's data went, if anywhere.
b={{q .Keep}}
rm -rf "$b"
mkdir -p "$b/etcd"
for f in {{qs .Identity}}; do
	if [ -f {{q .PKI}}/"$f" ]; then cp -p {{q .PKI}}/"$f" "$b/$f"; fi
done
{{template "kubeadm/etcd-aside" . -}}
kubeadm reset -f --skip-phases=remove-etcd-member >/dev/null 2>&1 || true
rm -rf {{q .Manifests}}/* {{q .KubeDir}}/*.conf {{.MarkerGlob}}
mkdir -p {{q .PKI}}/etcd
cp -rp "$b"/. {{q .PKI}}/
rm -rf "$b"
