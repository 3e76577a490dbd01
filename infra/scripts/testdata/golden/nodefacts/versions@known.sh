# homelab: nodefacts/versions
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Prints what a node runs, for roles/nodefacts.ParseVersions:
# "image=COMPONENT REF" for each of .Manifests; the stamps and versions of
# .Tools (host/versions: a tool whose stamp .Known records is not run);
# "joined=yes" when the node's init or join completed (its marker: one
# holding kubeadm's files without it is an interrupted run, not a node to
# upgrade); its cgroup file system and whether its kubelet's
# configuration allows cgroup v1. One awk for the manifests, and no
# command substitution but a tool's first read: a shell forked per fact
# was most of what this cost (docs/benchmarks.md). Paths are read below
# .Root (a test's tree). Read-only.
r=
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
for t in kubelet containerd; do
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
	'kubelet /usr/bin/kubelet 1234 56789 2026-01-01 00:00:00.000000000 +0000 2026-01-01 00:00:00.000000000 +0000') echo 'version.kubelet=v1.34.4' ;;
	'kubeadm '*) echo "version.kubeadm=$(kubeadm version -o short 2>/dev/null)" ;;
	'kubelet '*) echo "version.kubelet=$(kubelet --version 2>/dev/null | awk '{print $2}')" ;;
	'keepalived '*) echo "version.keepalived=$(keepalived --version 2>&1 | head -1 | awk '{print $2}')" ;;
	'containerd '*) echo "version.containerd=$(containerd --version 2>/dev/null | awk '{print $3}')" ;;
	esac
done
unset IFS

set --
for f in '/etc/kubernetes/manifests/kube-apiserver.yaml' '/etc/kubernetes/manifests/kube-controller-manager.yaml' '/etc/kubernetes/manifests/kube-scheduler.yaml'; do
	if [ -f "$r$f" ]; then set -- "$@" "$r$f"; fi
done
# A manifest replaced while awk reads (an upgrade) still leaves the others'.
[ $# -eq 0 ] || awk 'FNR == 1 { got = 0; c = FILENAME; sub(/.*\//, "", c); sub(/\.yaml$/, "", c) } !got && $1 == "image:" { print "image=" c " " $2; got = 1 }' "$@" || true
if [ -f "$r"'/etc/kubernetes/.homelab-init-complete' ] || [ -f "$r"'/etc/kubernetes/.homelab-join-complete' ]; then echo joined=yes; fi
printf 'cgroupfs='
stat -fc %T /sys/fs/cgroup 2>/dev/null || echo
if grep -qE '^failCgroupV1:[[:space:]]*false' "$r"'/var/lib/kubelet/config.yaml' 2>/dev/null; then echo failcgroupv1=false; fi
