package nodefacts

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/homelab-dev/homelab/roles/shell"
)

// VersionedComponents are the static pods whose image tags say which
// Kubernetes version a node's control plane runs (etcd's tag is etcd's own).
var VersionedComponents = []string{KubeAPIServer, KubeControllerManager, KubeScheduler}

// VersionsScript is read-only. It prints what a node runs, for
// ParseVersions: "image=COMPONENT REF" for each control-plane manifest,
// "kubelet=OUTPUT" (kubelet --version) with the kubelet's stamp
// (StampsScript), "joined=yes" when the node is a member of a cluster (its
// init or join completed), its cgroup file system and whether its
// kubelet's configuration allows cgroup v1.
var VersionsScript = VersionsScriptFor("", "")

// VersionsScriptFor is VersionsScript knowing the kubelet's stamp and
// version from an earlier read: a kubelet with that stamp is not run.
func VersionsScriptFor(kubeletStamp, kubeletVersion string) string {
	// One awk for the manifests and no command substitution: a shell
	// forked per fact was most of what this cost (docs/benchmarks.md).
	var b strings.Builder
	b.WriteString(StampsScript("kubelet"))
	run := `printf 'kubelet='; kubelet --version 2>/dev/null || echo`
	if kubeletStamp != "" && kubeletVersion != "" {
		run = `if [ "$stamps" = ` + shell.Quote(kubeletStamp) + ` ]; then echo kubelet=` + shell.Quote(kubeletVersion) + `; else ` + run + `; fi`
	}
	b.WriteString(`[ -n "$stamps" ] && { printf 'kubelet-stamp=%s\n' "$stamps"; ` + run + `; }` + "\n")
	b.WriteString("set --\n")
	for _, c := range VersionedComponents {
		b.WriteString(`[ -f ` + Manifest(c) + ` ] && set -- "$@" ` + Manifest(c) + "\n")
	}
	b.WriteString(`[ $# -eq 0 ] || awk 'FNR == 1 { got = 0; c = FILENAME; sub(/.*\//, "", c); sub(/\.yaml$/, "", c) } !got && $1 == "image:" { print "image=" c " " $2; got = 1 }' "$@"` + "\n")
	// A member is a node whose init or join finished (its marker): one
	// holding kubeadm's files without it is an interrupted run, which
	// its KubeadmJoin resets, not a node to upgrade.
	b.WriteString(`{ [ -f ` + InitMarker + ` ] || [ -f ` + JoinMarker + ` ]; } && echo joined=yes` + "\n")
	b.WriteString(`printf 'cgroupfs='; stat -fc %T /sys/fs/cgroup 2>/dev/null || echo` + "\n")
	b.WriteString(`grep -qE '^failCgroupV1:[[:space:]]*false' ` + KubeletConfigFile + ` 2>/dev/null && echo failcgroupv1=false` + "\n")
	b.WriteString("true")
	return b.String()
}

// Versions is what VersionsScript found on a node.
type Versions struct {
	// Components are the control-plane manifests' image tags, by
	// component ("v1.34.4").
	Components map[string]string
	// Kubelet is the kubelet's version, "" when none is installed;
	// KubeletStamp the stamp of the file it was read from (StampsScript).
	Kubelet, KubeletStamp string
	Joined                bool
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

// ParseVersions reads VersionsScript's output.
func ParseVersions(out string) Versions {
	v := Versions{Components: map[string]string{}}
	for _, line := range strings.Split(out, "\n") {
		k, val, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch k {
		case "image":
			c, ref, _ := strings.Cut(val, " ")
			if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
				v.Components[c] = ref[i+1:]
			}
		case "kubelet-stamp":
			v.KubeletStamp = val
		case "kubelet":
			// "Kubernetes v1.34.4"
			f := strings.Fields(val)
			if len(f) > 0 {
				v.Kubelet = f[len(f)-1]
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
