package aptrepo

import (
	"fmt"
	"strings"

	"github.com/homelab-dev/homelab/infra/lab/image"
)

// Revision is the Debian revision of every package the lab builds: the one
// pkgs.k8s.io gives a release's first build.
const Revision = "1.1"

// PackagedBinaries and PackagedImageFiles are what a node gets from the
// packages rather than from the lab's tools layer and image.
var (
	PackagedBinaries   = []string{"kubeadm", "kubelet", "kubectl"}
	PackagedImageFiles = []string{kubeletUnit, kubeadmDropIn}
)

const (
	kubeletUnit   = "/usr/lib/systemd/system/kubelet.service"
	kubeadmDropIn = "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"
)

// kubeletPostinst enables the unit on first install, as Debian packages
// of a service do (deb-systemd-helper), and leaves an admin's disable
// alone on upgrades; kubeadm starts it.
const kubeletPostinst = `#!/bin/sh
set -e
if [ "$1" = configure ] && [ -z "$2" ]; then
	systemctl enable kubelet.service >/dev/null 2>&1 || true
fi
`

// Binaries are one Kubernetes version's files the packages carry: the
// cached kubeadm and kubectl, and the kubelet: the real one for real
// nodes, or the stand-in built to report that version (StandIn).
type Binaries struct {
	Version string // v1.34.4
	Kubeadm string
	Kubectl string
	Kubelet string
	StandIn bool
}

// DebianVersion is a Kubernetes version's package version here.
func DebianVersion(kubernetesVersion string) string {
	return strings.TrimPrefix(kubernetesVersion, "v") + "-" + Revision
}

// Minor is the repository a version's packages go in: v1.34.4 -> v1.34.
func Minor(kubernetesVersion string) string {
	parts := strings.SplitN(strings.TrimPrefix(kubernetesVersion, "v"), ".", 3)
	if len(parts) < 2 {
		return ""
	}
	return "v" + parts[0] + "." + parts[1]
}

// Specs are a version's three packages, laid out and depending on what
// pkgs.k8s.io's do (kubernetes/release's kubeadm, kubelet and kubectl
// specs): kubeadm carries the kubelet's kubeadm drop-in and needs
// cri-tools, the kubelet carries its unit and /etc/default/kubelet and
// needs kubernetes-cni, mount and util-linux.
func Specs(b Binaries) ([]Spec, error) {
	for what, p := range map[string]string{"kubeadm": b.Kubeadm, "kubectl": b.Kubectl, "kubelet": b.Kubelet} {
		if p == "" {
			return nil, fmt.Errorf("%s %s: no binary", what, b.Version)
		}
	}
	v := DebianVersion(b.Version)
	unit, dropIn := imageFile(kubeletUnit), imageFile(kubeadmDropIn)
	kubeletDescription := "Node agent for Kubernetes clusters"
	if b.StandIn {
		kubeletDescription += " (the emulated homelab's stand-in, reporting " + b.Version + ")"
	}
	return []Spec{
		{
			Name: "kubeadm", Version: v, Section: "admin",
			Depends:     "cri-tools (>= 1.30.0)",
			Description: "Command-line utility for administering a Kubernetes cluster",
			Files: []File{
				{Path: "/usr/bin/kubeadm", Mode: 0o755, Src: b.Kubeadm},
				{Path: kubeadmDropIn, Mode: 0o644, Content: dropIn},
			},
		},
		{
			Name: "kubelet", Version: v, Section: "net",
			Depends:     "iptables (>= 1.4.21), kubernetes-cni (>= 1.2.0), libc6, mount, util-linux",
			Description: kubeletDescription,
			Postinst:    kubeletPostinst,
			Files: []File{
				{Path: "/usr/bin/kubelet", Mode: 0o755, Src: b.Kubelet},
				{Path: kubeletUnit, Mode: 0o644, Content: unit},
				{Path: "/etc/default/kubelet", Mode: 0o644, Content: []byte("KUBELET_EXTRA_ARGS=\n"), Conffile: true},
				// dpkg keeps no empty directories; the real package
				// keeps these two the same way.
				{Path: "/var/lib/kubelet/.kubelet-keep", Mode: 0o644},
				{Path: "/etc/kubernetes/manifests/.kubelet-keep", Mode: 0o644},
			},
		},
		{
			Name: "kubectl", Version: v, Section: "utils",
			Description: "Command-line utility for interacting with a Kubernetes cluster",
			Files:       []File{{Path: "/usr/bin/kubectl", Mode: 0o755, Src: b.Kubectl}},
		},
	}, nil
}

// cniVersions are the kubernetes-cni each minor's repository carries on
// pkgs.k8s.io; a minor not listed gets the newest.
var cniVersions = map[string]string{"v1.34": "1.7.1", "v1.35": "1.8.0"}

const newestCNI = "1.8.0"

// Dependencies are the packages a minor's repository carries for the
// three to install: stand-ins without files, since the lab's nodes run
// no CNI plugin binaries (Cilium's stand-in writes the CNI configuration)
// and no crictl (kubeadm talks CRI itself). They exist so that apt
// resolves the real packages' Depends as on a real node.
func Dependencies(minor string) []Spec {
	cni, ok := cniVersions[minor]
	if !ok {
		cni = newestCNI
	}
	return []Spec{
		{
			Name: "cri-tools", Version: strings.TrimPrefix(minor, "v") + ".0-" + Revision, Section: "admin",
			Description: "Command-line utility for interacting with a container runtime (the emulated homelab's stand-in: no crictl)",
		},
		{
			Name: "kubernetes-cni", Version: cni + "-" + Revision, Section: "net",
			Description: "Binaries required to provision kubernetes container networking (the emulated homelab's stand-in: no plugins)",
		},
	}
}

func imageFile(path string) []byte {
	for _, f := range image.Files() {
		if f.Path == path {
			return f.Content
		}
	}
	panic("image has no " + path) // embedded at build time
}
