package kubeadm

import (
	"k8s.io/apimachinery/pkg/util/version"
)

// CgroupDriver is the kubelet's cgroupDriver: systemd, as kubeadm
// defaults it and systemd asks of every other cgroup writer on its host.
// The container runtime must use the same driver.
const CgroupDriver = "systemd"

// pauseVersions is kubeadm's PauseVersion (cmd/kubeadm/app/constants) by
// the first minor that uses it: the sandbox image kubeadm pulls and
// preflight expects the runtime to use. `kubeadm config images list`
// prints it for a given --kubernetes-version.
var pauseVersions = []struct {
	from  *version.Version
	image string
}{
	{version.MustParseGeneric("v1.34.0"), "3.10.1"},
	{version.MustParseGeneric("v1.31.0"), "3.10"},
}

// PauseImage is the sandbox image kubeadm of kubernetesVersion expects,
// from registry.k8s.io; "" for a version older than this tool supports.
func PauseImage(kubernetesVersion string) string {
	v, err := version.ParseGeneric(kubernetesVersion)
	if err != nil {
		return ""
	}
	for _, p := range pauseVersions {
		if !v.LessThan(p.from) {
			return "registry.k8s.io/pause:" + p.image
		}
	}
	return ""
}
