package doctor

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/containerd"
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
