#!/usr/bin/env bash
# Builds the root filesystem of the emulated homelab's real nodes: Debian 12
# (bookworm) as a homelab machine runs it, installed with debootstrap from
# this machine's own apt source (no other address is reached): systemd as
# PID 1 (252, the last to run on a cgroup v1 host), containerd and runc,
# sshd, keepalived, and what kubeadm's preflight and the kubelet look for.
# Every lab node mounts it read-only as the lower layer of its own /etc,
# /var, /opt, /usr and /root (infra/lab). Cached outside the repository,
# keyed by the package list, so a changed list builds a new one. Prints
# the directory.
set -euo pipefail
suite=bookworm
packages=(
  systemd systemd-sysv dbus          # PID 1, journald, logind, systemctl
  openssh-server                     # the provisioner's way in
  containerd runc                    # the container runtime (containerd 1.6, runc 1.1)
  containernetworking-plugins        # bridge, ptp, host-local, loopback, portmap: the lab's pod network
  keepalived                         # the VIP on control-plane nodes
  iproute2 iptables nftables conntrack ethtool socat ebtables kmod  # kubeadm preflight, kube-proxy, the kubelet
  procps curl ca-certificates gnupg  # the provisioner's node scripts and apt's keys
  netplan.io udev                    # the static address: netplan renders it for systemd-networkd, and its apply asks udevadm (issue 32)
)
# recipe counts changes to the steps after debootstrap: a new one builds a
# new rootfs, as a new package list does.
recipe=2
list=$(printf '%s\n' "${packages[@]}" | sort | tr '\n' ' ')
key=$(printf '%s %s %s\n' "$suite" "$recipe" "$list" | sha256sum | cut -c1-12)
cache=${HOMELAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/homelab}
out="$cache/tools/rootfs-$suite-$key"
if [ -f "$out/.complete" ]; then echo "$out"; exit 0; fi

# This machine's Debian mirror, from its deb822 or one-line sources.
mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
if [ -z "$mirror" ]; then
  mirror=$(awk '$1 == "deb" && $3 == "'"$suite"'" { print $2; exit }' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
fi
[ -n "$mirror" ] || { echo "build-rootfs: no Debian mirror in /etc/apt/sources.list*" >&2; exit 1; }

tmp="$out.tmp"
rm -rf "$tmp"
mkdir -p "$(dirname "$out")"
echo "build-rootfs: debootstrap $suite (about 2 minutes, once)" >&2
# debootstrap mounts /proc and /sys under the target: unmount them whatever happens.
trap 'umount -R "$tmp/proc" "$tmp/sys" 2>/dev/null || true' EXIT
debootstrap --variant=minbase --include="$(IFS=,; echo "${packages[*]}")" "$suite" "$tmp" "$mirror" >&2

# What a machine gets at its own first boot, not from its image: each node
# gets its own host keys and machine-id from the lab.
rm -f "$tmp"/etc/ssh/ssh_host_* "$tmp/etc/machine-id" "$tmp/var/lib/dbus/machine-id"
: > "$tmp/etc/machine-id"
# Hardware and consoles a namespace does not have.
for u in systemd-udevd.service systemd-udevd-control.socket systemd-udevd-kernel.socket \
  systemd-udev-trigger.service systemd-udev-settle.service console-getty.service getty@tty1.service \
  sys-kernel-debug.mount sys-kernel-tracing.mount sys-kernel-config.mount sys-fs-fuse-connections.mount \
  systemd-modules-load.service systemd-remount-fs.service; do
  ln -sf /dev/null "$tmp/etc/systemd/system/$u"
done
# A machine's kernel brings its modules' directory, which pods mount
# (Cilium's agent, kube-proxy); the lab's nodes share a kernel whose
# modules they cannot load, so it is empty.
mkdir -p "$tmp/lib/modules"
# keepalived's package enables it; the provisioner enables it where the
# layout needs it, as on a machine where the user installed it disabled.
rm -f "$tmp/etc/systemd/system/multi-user.target.wants/keepalived.service"
rm -f "$tmp"/var/cache/apt/archives/*.deb
touch "$tmp/.complete"
mv "$tmp" "$out"
trap - EXIT
echo "$out"
