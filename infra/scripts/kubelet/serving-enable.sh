# Turns on the kubelet's serving certificate from the cluster CA
# (serverTLSBootstrap: true) in its configuration .Config, which kubeadm
# wrote from the kubelet-config ConfigMap, and restarts the kubelet so it
# asks for one. Only that line changes: whatever else the file holds,
# hand edits included, stays. Written beside the file and renamed over
# it, so the kubelet never reads half a file. Prints nothing.
config={{q .Config}}
if grep -qx 'serverTLSBootstrap: true' "$config"; then
	exit 0
fi
new="$config.homelab-new"
sed '/^serverTLSBootstrap:/d' "$config" >"$new"
echo 'serverTLSBootstrap: true' >>"$new"
chmod --reference="$config" "$new"
mv -f "$new" "$config"
systemctl restart kubelet
