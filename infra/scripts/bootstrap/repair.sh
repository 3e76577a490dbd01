# Regenerates, over the node's etcd data, what a set-up control-plane
# node lacks: the manifests an interrupted restore set aside (.Aside) are
# put back first (they are the node's own), then kubeadm's phases write
# whatever is still missing (.Phases) from the cluster's init config.
# Nothing is deleted; a file present is never written over.
# Prints "put back NAME" or "wrote PATH" for each file it brought back.
if [ -d {{q .Aside}} ]; then
	for f in {{q .Aside}}/*.yaml; do
		[ -f "$f" ] || continue
		[ -e {{q .Manifests}}/"${f##*/}" ] || { mv "$f" {{q .Manifests}}/; echo "put back ${f##*/}"; }
	done
	rmdir {{q .Aside}} 2>/dev/null || true
fi
{{- range .Phases}}
[ -f {{q .File}} ] || { kubeadm init phase {{.Phase}} --config {{q $.Config}} >/dev/null; echo wrote {{q .File}}; }
{{- end}}
