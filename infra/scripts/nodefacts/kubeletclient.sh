# Prints how the kubelet authenticates to the API, for
# roles/nodefacts.ParseKubeletClient: kubelet.conf (its lines, or, when
# it embeds a key, the whole file base64 with every client-key-data value
# replaced by base64 of "redacted": "kubelet-conf="), the certificate
# blocks of the kubelet's rotating client certificate file and the
# cluster CA. No key leaves the node. The common case, a kubelet.conf
# that names its files, starts no process but the shell. Paths are read
# below .Root (a test's tree). Read-only.
r={{with .Root}}{{q .}}{{end}}
conf="$r"{{q .KubeletConf}}
{{template "nodefacts/lines"}}
if [ -f "$conf" ]; then
	k=
	while IFS= read -r l || [ -n "$l" ]; do
		case $l in *client-key-data*) k=1 ;; esac
	done < "$conf"
	if [ -n "$k" ]; then
		echo "kubelet-conf=$(sed -E 's#(client-key-data"?[[:space:]]*:[[:space:]]*)["'"'"']?[A-Za-z0-9+/=]*["'"'"']?#\1"cmVkYWN0ZWQ="#' "$conf" | base64 -w0)"
	else
		echo kubelet-conf-file=yes
		lines kubelet-conf-line "$conf"
	fi
fi
certlines kubelet-current-line "$r"{{q .ClientCert}}
lines kubelet-ca-line "$r"{{q .CACert}}
