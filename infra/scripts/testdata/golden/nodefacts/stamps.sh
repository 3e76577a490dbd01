# homelab: nodefacts/stamps
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
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
for t in kubeadm kubelet; do
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
