package nodefacts

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// VersionedComponents are the static pods whose image tags say which
// Kubernetes version a node's control plane runs (etcd's tag is etcd's own).
var VersionedComponents = []string{KubeAPIServer, KubeControllerManager, KubeScheduler}

// Versions is what infra/scripts/nodefacts/versions.sh found on a node.
type Versions struct {
	// Components are the control-plane manifests' image tags, by
	// component ("v1.34.4").
	Components map[string]string
	// Kubelet is the kubelet's version, "" when none is installed;
	// KubeletStamp the stamp of the file it was read from
	// (infra/scripts/nodefacts/stamps.sh).
	Kubelet, KubeletStamp string
	// Containerd is containerd's version as it prints it (1.6.20~ds1,
	// v2.2.9), "" when none is installed; ContainerdStamp as above.
	Containerd, ContainerdStamp string
	Joined                      bool
	// CgroupV1: the node's /sys/fs/cgroup is cgroup v1's (a tmpfs of
	// hierarchies), which the kubelet refuses from v1.35 on unless its
	// configuration says failCgroupV1: false (KubeletAllowsCgroupV1).
	CgroupV1              bool
	KubeletAllowsCgroupV1 bool
}

// ControlPlane is the oldest of the control-plane components' versions
// (an upgrade cut off between two manifests is not done), "" when the
// node has none of them or a tag is no version.
func (v Versions) ControlPlane() string {
	var oldest *version.Version
	for _, c := range VersionedComponents {
		tag, ok := v.Components[c]
		if !ok {
			continue
		}
		sv, err := version.ParseSemantic(tag)
		if err != nil {
			return ""
		}
		if oldest == nil || sv.LessThan(oldest) {
			oldest = sv
		}
	}
	if oldest == nil {
		return ""
	}
	return "v" + oldest.String()
}

// ParseVersions reads what infra/scripts/nodefacts/versions.sh prints.
func ParseVersions(out string) Versions {
	v := Versions{Components: map[string]string{}}
	for _, line := range strings.Split(out, "\n") {
		k, val, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		if tool, stamp, ok := ToolFact(k); ok {
			switch {
			case tool == "kubelet" && stamp:
				v.KubeletStamp = val
			case tool == "kubelet":
				v.Kubelet = val
			case tool == "containerd" && stamp:
				v.ContainerdStamp = val
			case tool == "containerd":
				v.Containerd = val
			}
			continue
		}
		switch k {
		case "image":
			c, ref, _ := strings.Cut(val, " ")
			if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
				v.Components[c] = ref[i+1:]
			}
		case "joined":
			v.Joined = val == "yes"
		case "cgroupfs":
			v.CgroupV1 = val == "tmpfs"
		case "failcgroupv1":
			v.KubeletAllowsCgroupV1 = val == "false"
		}
	}
	return v
}

// ClusterConfigVersion is the kubernetesVersion of kubeadm-config's
// ClusterConfiguration (what `kubectl -n kube-system get configmap
// kubeadm-config -o jsonpath={.data.ClusterConfiguration}` prints): the
// version the last `kubeadm upgrade apply` or init uploaded.
func ClusterConfigVersion(clusterConfiguration string) string {
	for _, line := range strings.Split(clusterConfiguration, "\n") {
		if v, ok := strings.CutPrefix(line, "kubernetesVersion:"); ok {
			return strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	return ""
}

// ToolFact reads the key of one of infra/scripts/host/versions.sh's lines:
// "version.TOOL" (the tool's version) or "stamp.TOOL" (stamp: the file it
// was read from). ok is false for any other key.
func ToolFact(key string) (tool string, stamp, ok bool) {
	if tool, ok := strings.CutPrefix(key, "version."); ok {
		return tool, false, true
	}
	if tool, ok := strings.CutPrefix(key, "stamp."); ok {
		return tool, true, true
	}
	return "", false, false
}
