# homelab: nodefacts/versions
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Prints what a node runs, for roles/nodefacts.ParseVersions:
# "image=COMPONENT REF" for each of .Manifests, the kubelet's stamp
# (nodefacts/stamps) and "kubelet=OUTPUT" of kubelet --version, unless its
# stamp is .KubeletStamp, read before as .KubeletVersion; "joined=yes"
# when the node's init or join completed (its marker: one holding
# kubeadm's files without it is an interrupted run, not a node to
# upgrade), its cgroup file system and whether its kubelet's configuration
# allows cgroup v1. One awk for the manifests and no command substitution:
# a shell forked per fact was most of what this cost (docs/benchmarks.md).
# Paths are read below .Root (a test's tree). Read-only.
r=
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
for t in kubelet; do
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

if [ -n "$stamps" ]; then
	printf 'kubelet-stamp=%s\n' "$stamps"
	printf 'kubelet='
	kubelet --version 2>/dev/null || echo
fi
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
