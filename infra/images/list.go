// Package images knows every container image a declared cluster pulls
// and copies them into a registry mirror, so a homelab with no Internet
// (cluster.registry.mirror) can be staged from a machine that has it, or
// from an OCI layout carried in. Registries are spoken to with
// go-containerregistry, the library crane and ko use.
package images

import (
	"fmt"
	"os/exec"
	"strings"

	"github.com/homelab-dev/homelab/infra/helmrelease"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/cilium"
	"github.com/homelab-dev/homelab/roles/gpu"
	"github.com/homelab-dev/homelab/roles/kubeadm"
)

// Image is one image the cluster's nodes pull, and what pulls it.
type Image struct {
	Ref string `json:"ref"`
	For string `json:"for"`
}

// What pulls an image.
const (
	ForKubeadm      = "kubeadm"
	ForCilium       = "cilium chart"
	ForDevicePlugin = "nvidia device plugin"
)

// ListOptions say where the lists come from.
type ListOptions struct {
	// Kubeadm is a kubeadm binary of the declared version to ask for its
	// images (`kubeadm config images list`) instead of this tool's table.
	Kubeadm string
}

// List is every image the declared cluster pulls: kubeadm's (control
// plane, etcd, CoreDNS, pause, kube-proxy while it runs), the Cilium
// chart's as rendered with the cluster's values, and NVIDIA's device
// plugin where GPU workers run it. Warnings say where a list is a best
// guess. The chart is cluster.cilium.chart, else the pinned official one
// (fetched, so that needs the Internet); when it cannot be read, the
// images listed so far come back with the error.
func List(inv *inventory.Inventory, opts ListOptions) (imgs []Image, warnings []string, err error) {
	c := inv.Cluster
	kubeProxy := c.KubeProxy.Replacement == inventory.ReplacementNone
	var refs []string
	if opts.Kubeadm != "" {
		refs, err = askKubeadm(opts.Kubeadm, c.KubernetesVersion, kubeProxy)
	} else {
		var exact bool
		refs, exact, err = kubeadm.Images(c.KubernetesVersion, kubeProxy)
		if err == nil && !exact {
			warnings = append(warnings, fmt.Sprintf("the etcd and CoreDNS tags of kubeadm %s are those of another %s release measured by this tool; --kubeadm PATH asks kubeadm %s itself", c.KubernetesVersion, minor(c.KubernetesVersion), c.KubernetesVersion))
		}
	}
	if err != nil {
		return nil, warnings, err
	}
	for _, r := range refs {
		imgs = append(imgs, Image{Ref: r, For: ForKubeadm})
	}
	if c.CNI == inventory.CNICilium {
		refs, err := chartImages(inv)
		if err != nil {
			return imgs, warnings, err
		}
		for _, r := range refs {
			imgs = append(imgs, Image{Ref: r, For: ForCilium})
		}
	}
	if c.GPU.DevicePlugin.Enabled && hasNvidia(inv) {
		imgs = append(imgs, Image{Ref: gpu.DevicePluginImage + ":" + c.GPU.DevicePlugin.Version, For: ForDevicePlugin})
	}
	return imgs, warnings, nil
}

// Chart is the Cilium chart the cluster installs, as the Dataplane loads it.
func Chart(inv *inventory.Inventory) helmrelease.Chart {
	return helmrelease.Chart{Path: inv.Cluster.Cilium.Chart, RepoURL: cilium.ChartRepo, Name: cilium.ChartName, Version: cilium.ChartVersion}
}

func chartImages(inv *inventory.Inventory) ([]string, error) {
	ch, err := Chart(inv).Load()
	if err != nil {
		return nil, err
	}
	data, err := cilium.Render(inv)
	if err != nil {
		return nil, err
	}
	values, err := helmrelease.ParseValues(data)
	if err != nil {
		return nil, err
	}
	return helmrelease.Images(ch, values, cilium.Release, cilium.Namespace, inv.Cluster.KubernetesVersion)
}

// askKubeadm runs kubeadm's own list; kube-proxy drops out where the
// cluster skips its addon, as the product's init does.
func askKubeadm(bin, version string, kubeProxy bool) ([]string, error) {
	out, err := exec.Command(bin, "config", "images", "list", "--kubernetes-version", version).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return nil, fmt.Errorf("%s config images list: %w", bin, err)
	}
	var refs []string
	for _, r := range strings.Fields(string(out)) {
		if !kubeProxy && strings.Contains(r, "/kube-proxy:") {
			continue
		}
		refs = append(refs, r)
	}
	if len(refs) == 0 {
		return nil, fmt.Errorf("%s config images list printed no image", bin)
	}
	return refs, nil
}

func hasNvidia(inv *inventory.Inventory) bool {
	for _, n := range inv.Nodes {
		if gpu.IsNvidia(n) {
			return true
		}
	}
	return false
}

func minor(v string) string {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return v
	}
	return "v" + parts[0] + "." + parts[1]
}
