# Puts the manifests of .Pods that etcd/aside moved to .AsideDir back in
# .ManifestDir (the kubelet starts them), and removes .AsideDir once it
# is empty.
for p in {{qs .Pods}}; do
	if [ -f {{q .AsideDir}}/"$p".yaml ]; then
		mv -f {{q .AsideDir}}/"$p".yaml {{q .ManifestDir}}/
	fi
done
rmdir {{q .AsideDir}} 2>/dev/null || true
