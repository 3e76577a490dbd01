# homelab: host/versions
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
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
	'kubeadm /usr/bin/kubeadm 1 2 3 4') echo 'version.kubeadm=v1.34.4' ;;
	'kubelet /usr/bin/kubelet 5 6 7 8') echo 'version.kubelet=v1.34.4' ;;
	'kubeadm '*) echo "version.kubeadm=$(kubeadm version -o short 2>/dev/null)" ;;
	'kubelet '*) echo "version.kubelet=$(kubelet --version 2>/dev/null | awk '{print $2}')" ;;
	'keepalived '*) echo "version.keepalived=$(keepalived --version 2>&1 | head -1 | awk '{print $2}')" ;;
	'containerd '*) echo "version.containerd=$(containerd --version 2>/dev/null | awk '{print $3}')" ;;
	esac
done
unset IFS
