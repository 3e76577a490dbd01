# Stops the control plane for a restore: each static pod of .Pods whose
# manifest is in .ManifestDir is moved to .AsideDir (the kubelet stops
# it), to be put back by etcd/back.
for p in {{qs .Pods}}; do
	if [ -f {{q .ManifestDir}}/"$p".yaml ]; then
		mkdir -p {{q .AsideDir}}
		mv -f {{q .ManifestDir}}/"$p".yaml {{q .AsideDir}}/
	fi
done
