# Moves this control-plane node's etcd and apiserver to its address .New:
# their manifests come again from the kubeadm config .Config. With .Old,
# the address kubeadm baked in before, the kubeconfigs of the node's own
# components and the kubelet's node IP are rewritten in place too,
# keeping their credentials. The kubelet rereads its flags and kubeconfig
# only when restarted; the controller-manager and scheduler (processes
# matching .Restart) theirs likewise, and their manifests did not change,
# so they are ended and the kubelet starts them again. Prints what kubeadm
# prints.
config={{q .Config}}
kubeadm init phase etcd local --config "$config"
kubeadm init phase control-plane apiserver --config "$config"
{{- if .Old}}
new={{q .New}}
o=$(printf '%s\n' {{q .Old}} | sed 's/\./\\./g')
for f in {{qs .Kubeconfigs}}; do
	if [ -f "$f" ]; then
		sed -i "s#https://$o:#https://$new:#" "$f"
	fi
done
flags={{q .KubeletFlags}}
if [ -f "$flags" ]; then
	sed -i "s#--node-ip=$o\\b#--node-ip=$new#" "$flags"
fi
{{- end}}
systemctl restart kubelet
for p in {{qs .Restart}}; do
	pkill -f "$p" || true
done
