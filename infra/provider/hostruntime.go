package provider

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/homelab-dev/homelab/roles/containerd"
)

// parseRuntime reads host/facts' runtime.dump (or runtime.error) line.
func (st *HostState) parseRuntime(out string) {
	for _, line := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "runtime.error":
			st.RuntimeError = strings.TrimSpace(v)
		case "runtime.dump":
			data, err := base64.StdEncoding.DecodeString(v)
			var eff containerd.Effective
			if err == nil {
				err = containerd.ParseDump(data, &eff)
			}
			if err != nil {
				st.RuntimeError = err.Error()
				continue
			}
			st.RuntimeCgroupDriver, st.RuntimeSandboxImage = "cgroupfs", eff.SandboxImage
			if eff.SystemdCgroup {
				st.RuntimeCgroupDriver = "systemd"
			}
		}
	}
}

// runtimeProblems: a managed containerd must be one whose configuration
// format up writes (1.x); one the user configures must run pods on the
// kubelet's cgroup driver. Both are refused before kubeadm runs: the
// kubelet would start, and every pod fail or escape its limits after.
func (st HostState) runtimeProblems() []string {
	want := st.Runtime
	if want == nil || slices.Contains(st.Missing, "containerd") {
		return nil
	}
	if want.Manage {
		v := st.Versions["containerd"]
		if major, err := strconv.Atoi(strings.TrimPrefix(strings.SplitN(v, ".", 2)[0], "v")); err == nil && major >= 2 {
			return []string{fmt.Sprintf("runs containerd %s, and homelab writes containerd 1.x's configuration (config version 2) so far: "+
				"install the distribution's containerd (1.6 or 1.7), or set cluster.containerRuntime.manage: false and configure it yourself", v)}
		}
		return nil
	}
	if st.RuntimeError != "" {
		return []string{fmt.Sprintf("has a containerd that cannot load its configuration (%s): fix %s (`containerd config dump` on the node shows the error), "+
			"or set cluster.containerRuntime.manage: true and let up write it", st.RuntimeError, containerd.ConfigPath)}
	}
	if st.RuntimeCgroupDriver != "" && st.RuntimeCgroupDriver != want.CgroupDriver {
		return []string{fmt.Sprintf("runs containerd's runc on the %s cgroup driver, and the kubelet is given %s: set SystemdCgroup = %t in the runc options of %s and restart containerd, "+
			"or set cluster.containerRuntime.manage: true and let up write it", st.RuntimeCgroupDriver, want.CgroupDriver, want.CgroupDriver == "systemd", containerd.ConfigPath)}
	}
	return nil
}

// runtimeWarning: another sandbox image than kubeadm's works (kubeadm's
// preflight only warns), but an air-gapped node must have it, and the
// kubelet's garbage collection may remove kubeadm's pause image.
func (st HostState) runtimeWarning() string {
	want := st.Runtime
	if want == nil || want.Manage || st.RuntimeSandboxImage == "" || st.RuntimeSandboxImage == want.SandboxImage {
		return ""
	}
	return fmt.Sprintf("%s: containerd's sandbox image is %s, kubeadm's is %s: set sandbox_image in %s (or manage the runtime), or make sure the node has %s",
		st.Connection.Node, st.RuntimeSandboxImage, want.SandboxImage, containerd.ConfigPath, st.RuntimeSandboxImage)
}
