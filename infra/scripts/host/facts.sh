# Prints a node's live facts as key=value lines; read-only
# (provider.HostState.parseFacts reads them). The VIP is a secondary
# address of its holder: leaving secondaries out keeps the facts stable
# while the VIP moves. Files are read with the shell's own read, not a
# forked cat or command substitution each: on a busy machine every
# process a refresh starts on every node is dear (docs/benchmarks.md).
# The CA's certificate (.CA) and the kubelet client's (.KubeletCert,
# without its key) come back as nodefacts/lines' lines; "kubeletconf=yes"
# when .KubeletConf is there. Then host/versions (.Versions), and
# "missing=NAME" for each of .Requires not in PATH. With .RuntimeDump,
# containerd's effective configuration, base64 ("runtime.dump="), or why
# it cannot be read ("runtime.error="), and why the running containerd
# does not answer on its socket ("runtime.down="), asked with its own ctr.
read -r h </proc/sys/kernel/hostname
echo "hostname=$h"
read -r k </proc/sys/kernel/osrelease
echo "kernel=$k"
if [ -r /etc/os-release ]; then
	# The file is the distribution's; it is not ours to check.
	# shellcheck disable=SC1091
	(. /etc/os-release && echo "os=${PRETTY_NAME-}") || true
fi
for i in /sys/class/net/*; do
	n=${i##*/}
	# lo has no MAC, and bonding_masters is a file, not an interface.
	[ "$n" != lo ] || continue
	m=
	read -r m 2>/dev/null <"$i/address" || continue
	echo "mac=$m"
done
ip -o -4 addr show scope global 2>/dev/null | while read -r _ _ _ a rest; do
	case " $rest " in *" secondary "*) continue ;; esac
	echo "addr=${a%%/*}"
done || true
if command -v nvidia-smi >/dev/null; then
	nvidia-smi -L 2>/dev/null | sed 's/^/gpu=/' || true
fi
{{template "nodefacts/lines"}}
certlines ca {{q .CA}}
certlines kubeletcert {{q .KubeletCert}}
if [ -f {{q .KubeletConf}} ]; then echo kubeletconf=yes; fi
{{template "host/versions" .Versions}}
{{- range .Requires}}
command -v {{q .}} >/dev/null || echo missing={{q .}}
{{- end}}
{{- if .RuntimeDump}}
if dump=$(containerd config dump 2>&1); then
	echo "runtime.dump=$(printf '%s' "$dump" | base64 -w 0)"
else
	echo "runtime.error=$(printf '%s' "$dump" | tail -n 1)"
fi
if command -v ctr >/dev/null && ! down=$(ctr --address {{q .RuntimeSocket}} --timeout 5s version 2>&1); then
	echo "runtime.down=$(printf '%s' "$down" | tail -n 1)"
fi
{{- end}}
