// Package base renders what every node needs before kubeadm runs: the
// kernel modules and sysctls the kubelet, kube-proxy and CNIs rely on.
package base

import "github.com/homelab-dev/homelab/roles/file"

const (
	ModulesPath = "/etc/modules-load.d/homelab-kubernetes.conf"
	SysctlPath  = "/etc/sysctl.d/90-homelab-kubernetes.conf"
)

const modules = `# Rendered by homelab: loaded at boot for container networking.
overlay
br_netfilter
`

// kubeadm's preflight fails without ip_forward; bridged pod traffic must
// pass iptables for kube-proxy's rules to see it.
const sysctls = `# Rendered by homelab.
net.ipv4.ip_forward = 1
net.bridge.bridge-nf-call-iptables = 1
net.bridge.bridge-nf-call-ip6tables = 1
`

// Files returns the base files of any node.
func Files() []file.File {
	return []file.File{
		{Path: ModulesPath, Mode: 0o644, Content: []byte(modules)},
		{Path: SysctlPath, Mode: 0o644, Content: []byte(sysctls), OnChange: "sysctl"},
	}
}
