# homelab: host/facts
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
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
# Defines two functions that print a file with the shell's own read, no
# forked cat, sed or base64 (a process per file was most of a refresh's
# cost, docs/benchmarks.md). "lines KEY FILE" prints each line as
# KEY=LINE; "certlines KEY FILE" only its certificate blocks, so a key kept
# beside them never leaves the node. A missing file prints nothing.
# roles/nodefacts.Lines reads either back. Both return 0, so a script
# under set -e goes on.
lines() {
	[ -f "$2" ] || return 0
	while IFS= read -r l || [ -n "$l" ]; do
		printf '%s=%s\n' "$1" "$l"
	done < "$2"
}
certlines() {
	[ -f "$2" ] || return 0
	c=
	while IFS= read -r l || [ -n "$l" ]; do
		case $l in "-----BEGIN CERTIFICATE-----") c=1 ;; esac
		if [ -n "$c" ]; then printf '%s=%s\n' "$1" "$l"; fi
		case $l in "-----END CERTIFICATE-----") c= ;; esac
	done < "$2"
}

certlines ca '/etc/kubernetes/pki/ca.crt'
certlines kubeletcert '/var/lib/kubelet/pki/kubelet-client-current.pem'
if [ -f '/etc/kubernetes/kubelet.conf' ]; then echo kubeletconf=yes; fi
# Prints each installed tool's version and stamp (nodefacts/stamps over
# .Tools, one stat for all): "stamp.TOOL=LINE", "version.TOOL=VERSION".
# A tool whose stamp is one .Known records is the same file, and the
# version recorded with it is printed instead of running the tool: every
# refresh ran four binaries on every node, most of them large Go
# programs, while the whole cluster's other reads compete for the same
# cores. A tool not installed prints neither.
# Sets stamps to a line "PATH INODE SIZE CHANGE MODIFY" (to the
# nanosecond, of a link's target) for each of .Tools found in PATH, one
# stat for all. A binary replaced (dpkg renames a new file over it, a
# copy writes it in place) gets another inode or change time, so a
# version read once holds until its stamp changes and large Go programs
# need not run on every read. The shell walks PATH itself: command -v
# takes one name in dash. Uses the positional parameters.
set --
# The tools are this product's own names, one word each; a list of one
# is no mistake here.
# shellcheck disable=SC2043
for t in kubeadm kubelet keepalived containerd; do
	IFS=:
	for d in $PATH; do
		d=${d:-.}
		if [ -f "$d/$t" ] && [ -x "$d/$t" ]; then
			set -- "$@" "$d/$t"
			break
		fi
	done
	unset IFS
done
# The including script reads stamps.
# shellcheck disable=SC2034
if [ $# -eq 0 ]; then
	stamps=
else
	stamps=$(stat -Lc '%n %i %s %z %y' "$@" 2>/dev/null) || true
fi

IFS='
'
for l in $stamps; do
	p=${l%% *}
	t=${p##*/}
	echo "stamp.$t=$l"
	case "$t $l" in
	'kubeadm '*) echo "version.kubeadm=$(kubeadm version -o short 2>/dev/null)" ;;
	'kubelet '*) echo "version.kubelet=$(kubelet --version 2>/dev/null | awk '{print $2}')" ;;
	'keepalived '*) echo "version.keepalived=$(keepalived --version 2>&1 | head -1 | awk '{print $2}')" ;;
	'containerd '*) echo "version.containerd=$(containerd --version 2>/dev/null | awk '{print $3}')" ;;
	esac
done
unset IFS

command -v 'kubeadm' >/dev/null || echo missing='kubeadm'
command -v 'keepalived' >/dev/null || echo missing='keepalived'
