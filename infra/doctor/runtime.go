package doctor

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/containerd"
	"github.com/homelab-dev/homelab/roles/gpu"
)

// runtimeFacts are the node's containerd as doctor/node read it, and the
// cgroup driver its kubelet was given.
type runtimeFacts struct {
	found         bool // containerd is on the node's PATH
	eff           containerd.Effective
	err           error // containerd's version or configuration unreadable
	kubeletDriver string
	// stale are configuration files changed after containerd started.
	stale []string
	// hosts are the hosts.toml files under containerd.CertsD, by registry.
	hosts    map[string]containerd.Hosts
	hostsErr []string
}

func (r *runtimeFacts) read(key, value string) {
	switch key {
	case "containerd.version":
		r.found = true
		var err error
		if r.eff.Version, r.eff.Major, err = containerd.ParseVersion(value); err != nil && r.err == nil {
			r.err = err
		}
	case "containerd.dump":
		data, err := base64.StdEncoding.DecodeString(value)
		if err == nil && len(data) == 0 {
			err = fmt.Errorf("containerd config dump printed nothing: its configuration does not load")
		}
		if err == nil {
			err = containerd.ParseDump(data, &r.eff)
		}
		if err != nil && r.err == nil {
			r.err = err
		}
	case "kubelet.cgroupDriver":
		r.kubeletDriver = value
	case "containerd.stale":
		r.stale = append(r.stale, value)
	case "containerd.hosts":
		registry, enc, _ := strings.Cut(value, " ")
		data, err := base64.StdEncoding.DecodeString(enc)
		var h containerd.Hosts
		if err == nil {
			h, err = containerd.ParseHosts(data)
		}
		if err != nil {
			r.hostsErr = append(r.hostsErr, fmt.Sprintf("%s: %v", containerd.HostsPath(registry), err))
			return
		}
		if r.hosts == nil {
			r.hosts = map[string]containerd.Hosts{}
		}
		r.hosts[registry] = h
	}
}

// checkRuntime adds the node's runtime row: containerd runs pods on the
// cgroup driver the kubelet was given (systemd, as homelab configures
// the kubelet, before kubeadm has written its configuration). A package's
// containerd left at its defaults runs runc on cgroupfs, the most common
// way a hand-built kubeadm node breaks.
func (d *doctor) checkRuntime(n inventory.Node, f *nodeFacts) {
	r := f.runtime
	want := r.kubeletDriver
	if want == "" {
		want = "systemd"
	}
	switch {
	case !r.found:
		d.r.add("runtime", n.Name, Warn, "no containerd on the node's PATH: the runtime's cgroup driver is not checked")
	case r.err != nil:
		d.r.add("runtime", n.Name, Fail, "containerd %s: %v", r.eff.Version, r.err)
		d.r.cause("%s: containerd's configuration cannot be read (%v): check %s with `containerd config dump` on the node", n.Name, r.err, containerd.ConfigPath)
	case r.eff.CgroupDriver() != want:
		d.r.add("runtime", n.Name, Fail, "containerd %s runs %s on %s cgroups, the kubelet on %s", r.eff.Version, r.eff.Runtime, r.eff.CgroupDriver(), want)
		d.r.cause("%s: containerd runs pods on the %s cgroup driver and the kubelet on %s, so runc puts pods' containers in cgroups outside the kubelet's (its limits and evictions no longer hold them) or fails to start them: set SystemdCgroup = %v in the %s runtime's options in %s and run `systemctl restart containerd` on the node",
			n.Name, r.eff.CgroupDriver(), want, want == "systemd", r.eff.Runtime, containerd.ConfigPath)
	case len(r.stale) > 0:
		// What the files say is right, but containerd has not read them:
		// it may run on anything the file said before.
		d.r.add("runtime", n.Name, Warn, "containerd %s started before %s changed: it runs on the configuration before", r.eff.Version, strings.Join(r.stale, ", "))
		d.r.cause("%s: containerd reads %s only when it starts, and it changed since: run `systemctl restart containerd` on the node (homelab up does when it puts back a file edited on the node)", n.Name, strings.Join(r.stale, ", "))
	default:
		d.r.add("runtime", n.Name, OK, "containerd %s, %s on %s cgroups as the kubelet, sandbox %s", r.eff.Version, r.eff.Runtime, want, r.eff.SandboxImage)
	}
}

// checkRuntimeVersion adds the node's runtime version row: containerd's
// release against the declared Kubernetes version, by containerd's own
// support matrix. A release the kubelet cannot run on fails; one it runs
// on but containerd does not test it with warns, so the runtime is
// upgraded before it is what stops a Kubernetes upgrade (v1.36 needs
// containerd 2.x).
func (d *doctor) checkRuntimeVersion(n inventory.Node, f *nodeFacts) {
	r := f.runtime
	kube := d.t.Inventory.Cluster.KubernetesVersion
	if !r.found || r.eff.Version == "" || kube == "" {
		return // the runtime row says why
	}
	v, err := containerd.Supports(r.eff.Version, kube)
	switch {
	case err != nil:
		d.r.add("runtime version", n.Name, Warn, "%v", err)
	case v.Support == containerd.Unsupported:
		d.r.add("runtime version", n.Name, Fail, "containerd %s cannot run the kubelet of %s", r.eff.Version, kube)
		d.r.cause("%s: %s", n.Name, v.Reason)
	case v.Support == containerd.Untested:
		d.r.add("runtime version", n.Name, Warn, "containerd %s is not one containerd tests with %s", r.eff.Version, kube)
		d.r.cause("%s: %s: it runs, but upgrade containerd before it is what stops a Kubernetes upgrade", n.Name, v.Reason)
	case v.Support == containerd.Unknown:
		d.r.add("runtime version", n.Name, OK, "containerd %s (%s)", r.eff.Version, v.Reason)
	default:
		d.r.add("runtime version", n.Name, OK, "containerd %s, which containerd tests with %s", r.eff.Version, kube)
	}
}

// checkGPURuntime adds, on a node declaring NVIDIA GPUs, the gpu runtime
// row: containerd has the nvidia handler the RuntimeClass names, on the
// toolkit's binary. Without it every GPU pod fails to start with `no
// runtime for "nvidia" is configured`, while the node reports Ready.
func (d *doctor) checkGPURuntime(n inventory.Node, f *nodeFacts) {
	r := f.runtime
	if !gpu.IsNvidia(n) || !r.found || r.err != nil {
		return // the runtime row says why
	}
	bin, ok := r.eff.Runtimes[gpu.RuntimeClassName]
	switch {
	case !ok:
		d.r.add("gpu runtime", n.Name, Fail, "containerd %s has no %s runtime: GPU pods (runtimeClassName: %s) cannot start", r.eff.Version, gpu.RuntimeClassName, gpu.RuntimeClassName)
		d.r.cause("%s: %s", n.Name, d.gpuRuntimeFix(r.eff))
	case bin != gpu.RuntimeBinary:
		d.r.add("gpu runtime", n.Name, Warn, "containerd's %s runtime runs %q, not %s", gpu.RuntimeClassName, bin, gpu.RuntimeBinary)
	default:
		d.r.add("gpu runtime", n.Name, OK, "containerd's %s runtime on %s", gpu.RuntimeClassName, bin)
	}
}

// gpuRuntimeFix is how the nvidia runtime gets into the node's containerd.
func (d *doctor) gpuRuntimeFix(eff containerd.Effective) string {
	switch {
	case d.t.Inventory.Cluster.ContainerRuntime.Manage:
		return fmt.Sprintf("run `homelab up`, which writes the %s runtime into %s and restarts containerd", gpu.RuntimeClassName, containerd.ConfigPath)
	case eff.Major < 2:
		// TestContainerd1ReplacesTheCRISectionOnImport: an imported file
		// holding a CRI section replaces the whole section in 1.x.
		return fmt.Sprintf("containerd %s does not take a runtime from %s (1.x reads it only when %s imports it, and then it replaces that file's whole CRI section): add the runtime to %s (`nvidia-ctk runtime configure --runtime=containerd`) and run `systemctl restart containerd`, or set cluster.containerRuntime.manage: true",
			eff.Version, gpu.ContainerdDropInPath, containerd.ConfigPath, containerd.ConfigPath)
	default:
		return fmt.Sprintf("containerd reads %s only when %s imports it: add imports = [%q] there and run `systemctl restart containerd` (homelab up writes the drop-in), or set cluster.containerRuntime.manage: true",
			gpu.ContainerdDropInPath, containerd.ConfigPath, containerd.ConfD+"/*.toml")
	}
}

// checkMirror adds the node's mirror row: where its pulls go, as
// containerd reads it (config_path, then each registry's hosts.toml),
// against cluster.registry. A declared mirror the node does not use is a
// failure: an air-gapped node then pulls from a registry it cannot reach,
// and the pod waits in ImagePullBackOff.
func (d *doctor) checkMirror(n inventory.Node, f *nodeFacts) {
	r := f.runtime
	if !r.found || r.err != nil {
		return // the runtime row says why
	}
	declared := d.t.Inventory.Cluster.RegistryMirrors()
	reads := r.eff.RegistryConfigPath == containerd.CertsD
	var wrong []string
	for _, reg := range slices.Sorted(maps.Keys(declared)) {
		want := strings.TrimSuffix(declared[reg], "/")
		h, ok := r.hosts[reg]
		switch {
		case !reads:
		case !ok:
			wrong = append(wrong, fmt.Sprintf("pulls of %s go to %s itself, not %s", reg, reg, want))
		case strings.TrimSuffix(h.First(), "/") != want:
			wrong = append(wrong, fmt.Sprintf("pulls of %s go first to %s, not %s", reg, h.First(), want))
		}
	}
	switch {
	case len(declared) > 0 && !reads:
		d.r.add("mirror", n.Name, Fail, "containerd reads no mirror (its config_path is %q): every registry is pulled from directly", r.eff.RegistryConfigPath)
		d.r.cause("%s: containerd reads mirrors' hosts.toml only with config_path = %q in its CRI registry section, which %s lacks: run `homelab up` with cluster.containerRuntime.manage: true, or set it yourself and restart containerd", n.Name, containerd.CertsD, containerd.ConfigPath)
	case len(wrong) > 0:
		d.r.add("mirror", n.Name, Fail, "%s", strings.Join(wrong, "; "))
		d.r.cause("%s: its hosts.toml under %s do not send pulls to cluster.registry's mirrors: run `homelab up`, which writes them", n.Name, containerd.CertsD)
	case len(r.hostsErr) > 0:
		d.r.add("mirror", n.Name, Warn, "containerd cannot read %s", strings.Join(r.hostsErr, "; "))
	default:
		d.r.add("mirror", n.Name, OK, "%s", inEffect(reads, r.hosts))
	}
}

// inEffect says where the node's pulls go, grouped by first host.
func inEffect(reads bool, hosts map[string]containerd.Hosts) string {
	if !reads || len(hosts) == 0 {
		return "no mirror: every registry is pulled from directly"
	}
	by := map[string][]string{}
	for reg, h := range hosts {
		by[h.First()] = append(by[h.First()], reg)
	}
	var parts []string
	for _, to := range slices.Sorted(maps.Keys(by)) {
		regs := by[to]
		slices.Sort(regs)
		parts = append(parts, fmt.Sprintf("pulls of %s go to %s", strings.Join(regs, ", "), to))
	}
	return strings.Join(parts, "; ") + "; any other registry is pulled from directly"
}
