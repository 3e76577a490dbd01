# homelab: packages/query
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Reads, read-only, the packages .Names as dpkg knows them: one line
# "pkg=NAME STATUS VERSION" each (a package dpkg never saw prints
# nothing), after gpu/detect's lines when .GPU is set (toolkit packages
# are installed only where a GPU shows).
# Lists, read-only, what a node shows of NVIDIA GPUs (gpu.ParseDetection
# reads it): nvidia-smi -L's lines ("smi=", the driver answers), the
# /dev/nvidiaN device nodes ("dev=", the driver is loaded) and the NVIDIA
# display controllers under .PCI ("pci=DEVICE CLASS": vendor 0x10de,
# class 0x03xxxx: the card is there, driver or not). The shell reads each
# device's files itself: a command substitution per file forked a shell
# and a cat for every PCI device on every read. A file that cannot be
# read is no GPU, and says nothing on stderr.
if command -v nvidia-smi >/dev/null 2>&1; then
	nvidia-smi -L 2>/dev/null | sed 's/^/smi=/' || true
fi
for d in /dev/nvidia[0-9]*; do
	if [ -e "$d" ]; then echo "dev=$d"; fi
done
for d in '/sys/bus/pci/devices'/*; do
	[ -r "$d/vendor" ] || continue
	v=
	read -r v 2>/dev/null <"$d/vendor" || true
	[ "$v" = 0x10de ] || continue
	c=
	read -r c 2>/dev/null <"$d/class" || true
	case "$c" in 0x03*) echo "pci=${d##*/} $c" ;; esac
done

dpkg-query -W -f='pkg=${Package} ${db:Status-Abbrev} ${Version}\n' 'nvidia-container-toolkit' 'nvidia-container-toolkit-base' 'libnvidia-container-tools' 'libnvidia-container1' 2>/dev/null || true
