# Prints each installed tool's version and stamp (nodefacts/stamps over
# .Tools, one stat for all): "stamp.TOOL=LINE", "version.TOOL=VERSION".
# A tool whose stamp is one .Known records is the same file, and the
# version recorded with it is printed instead of running the tool: every
# refresh ran four binaries on every node, most of them large Go
# programs, while the whole cluster's other reads compete for the same
# cores. A tool not installed prints neither.
{{template "nodefacts/stamps" .}}
IFS='
'
for l in $stamps; do
	p=${l%% *}
	t=${p##*/}
	echo "stamp.$t=$l"
	case "$t $l" in
{{- range .Known}}
	{{q (printf "%s %s" .Tool .Stamp)}}) echo {{q (printf "version.%s=%s" .Tool .Version)}} ;;
{{- end}}
	'kubeadm '*) echo "version.kubeadm=$(kubeadm version -o short 2>/dev/null)" ;;
	'kubelet '*) echo "version.kubelet=$(kubelet --version 2>/dev/null | awk '{print $2}')" ;;
	'keepalived '*) echo "version.keepalived=$(keepalived --version 2>&1 | head -1 | awk '{print $2}')" ;;
	'containerd '*) echo "version.containerd=$(containerd --version 2>/dev/null | awk '{print $3}')" ;;
	esac
done
unset IFS
