package provider

import (
	"encoding/base64"
	"fmt"
	"slices"
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
		case "runtime.down":
			st.RuntimeDown = strings.TrimSpace(v)
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
// kubelet's cgroup driver; either must be a release the declared
// kubelet runs on. Each is refused before kubeadm runs: the kubelet
// would start, and every pod fail or escape its limits after.
func (st HostState) runtimeProblems() []string {
	want := st.Runtime
	if want == nil || slices.Contains(st.Missing, "containerd") {
		return nil
	}
	v := st.Versions["containerd"]
	if verdict, ok := st.runtimeSupport(); ok && verdict.Support == containerd.Unsupported {
		return []string{fmt.Sprintf("runs containerd %s, which cluster.kubernetesVersion %s cannot run on: %s (or declare a Kubernetes version it runs)", v, want.KubernetesVersion, verdict.Reason)}
	}
	if want.Manage {
		if major, err := containerd.Major(v); err == nil && major >= 2 {
			return []string{fmt.Sprintf("runs containerd %s, and homelab writes containerd 1.x's configuration (config version 2) for a containerd it did not install: "+
				"pin it in cluster.containerRuntime.packages (up then installs and configures that release), install the distribution's containerd (1.6 or 1.7), "+
				"or set cluster.containerRuntime.manage: false and configure it yourself", v)}
		}
		return nil
	}
	if st.RuntimeError != "" {
		return []string{fmt.Sprintf("has a containerd that cannot load its configuration (%s): fix %s (`containerd config dump` on the node shows the error), "+
			"or set cluster.containerRuntime.manage: true and let up write it", st.RuntimeError, containerd.ConfigPath)}
	}
	if st.RuntimeDown != "" {
		return []string{fmt.Sprintf("has a containerd that does not answer on %s (%s): start it (`systemctl enable --now containerd`; its journal says why it stops), "+
			"or set cluster.containerRuntime.manage: true and let up configure and start it", containerd.Socket, st.RuntimeDown)}
	}
	if st.RuntimeCgroupDriver != "" && st.RuntimeCgroupDriver != want.CgroupDriver {
		return []string{fmt.Sprintf("runs containerd's runc on the %s cgroup driver, and the kubelet is given %s: set SystemdCgroup = %t in the runc options of %s and restart containerd, "+
			"or set cluster.containerRuntime.manage: true and let up write it", st.RuntimeCgroupDriver, want.CgroupDriver, want.CgroupDriver == "systemd", containerd.ConfigPath)}
	}
	return nil
}

// runtimeSupport is how the node's containerd stands with the declared
// Kubernetes version; ok is false when either is not known (a stack
// from before the version was passed, a version the node did not print).
func (st HostState) runtimeSupport() (v containerd.Verdict, ok bool) {
	cv := st.Versions["containerd"]
	if st.Runtime == nil || st.Runtime.KubernetesVersion == "" || cv == "" {
		return containerd.Verdict{}, false
	}
	v, err := containerd.Supports(cv, st.Runtime.KubernetesVersion)
	return v, err == nil
}

// runtimeWarnings: another sandbox image than kubeadm's works (kubeadm's
// preflight only warns), but an air-gapped node must have it, and the
// kubelet's garbage collection may remove kubeadm's pause image. A
// containerd that containerd's own matrix does not test with the declared
// Kubernetes version runs (Debian 12's 1.6.20 runs v1.35), so it is said,
// not refused: the next minor may be the one that needs another.
func (st HostState) runtimeWarnings() []string {
	want := st.Runtime
	if want == nil {
		return nil
	}
	var ws []string
	if v, ok := st.runtimeSupport(); ok && v.Support == containerd.Untested {
		ws = append(ws, fmt.Sprintf("%s: %s; it runs, but upgrade containerd before it is the reason a Kubernetes upgrade stops", st.Connection.Node, v.Reason))
	}
	if !want.Manage && st.RuntimeSandboxImage != "" && st.RuntimeSandboxImage != want.SandboxImage {
		ws = append(ws, fmt.Sprintf("%s: containerd's sandbox image is %s, kubeadm's is %s: set sandbox_image in %s (or manage the runtime), or make sure the node has %s",
			st.Connection.Node, st.RuntimeSandboxImage, want.SandboxImage, containerd.ConfigPath, st.RuntimeSandboxImage))
	}
	return ws
}
