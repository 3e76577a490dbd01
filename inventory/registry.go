package inventory

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
)

// MirroredRegistries are the registries the cluster's own images come
// from, which cluster.registry.mirror stands in for: kubeadm's
// (control plane, etcd, CoreDNS, pause), Cilium's, NVIDIA's device
// plugin's, and Docker Hub for what users run most.
var MirroredRegistries = []string{"docker.io", "nvcr.io", "quay.io", "registry.k8s.io"}

// RegistryMirrors is each mirrored registry host with its mirror's URL:
// every MirroredRegistries host at cluster.registry.mirror, then the
// per-host entries over it; nil with neither.
func (c Cluster) RegistryMirrors() map[string]string {
	out := map[string]string{}
	if c.Registry.Mirror != "" {
		for _, r := range MirroredRegistries {
			out[r] = c.Registry.Mirror
		}
	}
	for r, u := range c.Registry.Mirrors {
		out[r] = u
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// registryHost is a registry as image references name it: a host name
// with an optional port, nothing else.
var registryHost = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:[0-9]{1,5})?$`)

func checkRegistry(ps *problems, inv *Inventory) {
	r := inv.Cluster.Registry
	checkMirrorURL(ps, "cluster.registry.mirror", r.Mirror)
	if (r.Mirror != "" || len(r.Mirrors) > 0) && !inv.Cluster.ContainerRuntime.Manage {
		ps.warnf("cluster.registry", "containerd reads the mirrors' hosts.toml only with config_path = %q in its CRI registry section, which you configure (cluster.containerRuntime.manage: false)", "/etc/containerd/certs.d")
	}
	hosts := make([]string, 0, len(r.Mirrors))
	for h := range r.Mirrors {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for _, h := range hosts {
		field := fmt.Sprintf("cluster.registry.mirrors[%q]", h)
		if !registryHost.MatchString(h) {
			ps.errorf(field, "%q is not a registry host; name it as image references do, e.g. registry.k8s.io or ghcr.io (no scheme, no path)", h)
		}
		if r.Mirrors[h] == "" {
			ps.errorf(field, "is empty; give the mirror's URL, e.g. http://10.0.0.2:5000")
			continue
		}
		checkMirrorURL(ps, field, r.Mirrors[h])
	}
}

// checkMirrorURL: containerd's hosts.toml takes a mirror as scheme and
// host; a path or credentials there would be dropped or land in a file
// every node keeps.
func checkMirrorURL(ps *problems, field, s string) {
	if s == "" {
		return
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		ps.errorf(field, "%q is not a mirror URL; use http(s)://HOST[:PORT], e.g. http://10.0.0.2:5000", s)
	case u.User != nil || u.RawQuery != "" || (u.Path != "" && u.Path != "/"):
		ps.errorf(field, "%q carries a path, credentials or a query; containerd's mirror is http(s)://HOST[:PORT] only", s)
	}
}
