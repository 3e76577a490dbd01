package lab

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/homelab-dev/homelab/infra/envvars"
	"github.com/homelab-dev/homelab/infra/lab/ciliumchart"
	"github.com/homelab-dev/homelab/infra/lab/nodeimages"
	"github.com/homelab-dev/homelab/infra/lab/registry"
	"github.com/homelab-dev/homelab/infra/lab/standin/images"
	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/ciliumagent"
	"github.com/homelab-dev/homelab/roles/containerd"
)

// The lab's registry: the images real nodes run, built here from the
// binaries the tools cache holds, served in the gateway namespace as the
// mirror of registry.k8s.io and quay.io (an air-gapped homelab's own
// registry). An image it lacks fails to pull, as it would there.

// envRegistryServe carries the registry's address and layout to the
// process the lab starts for it; the package's init() acts on it.
const envRegistryServe = envvars.LabRegistryServe

func (l *Lab) registryDir() string { return filepath.Join(l.Dir, "registry") }

// registryList names the image layouts the registry serves, one per line.
func (l *Lab) registryList() string    { return filepath.Join(l.registryDir(), "layouts") }
func (l *Lab) registryLogPath() string { return filepath.Join(l.registryDir(), "server.log") }

// imageCache holds every image the lab built, one OCI layout each, keyed
// by its inputs (nodeimages.Cached). Safe to delete while no lab runs.
func imageCache() string { return filepath.Join(toolCache(), "images") }

// RegistryLayouts are the OCI layouts the lab's registry serves, one per
// image: what a user would carry into an air-gapped homelab for
// `homelab images mirror --from-layout`.
func (l *Lab) RegistryLayouts() ([]string, error) {
	data, err := os.ReadFile(l.registryList())
	if err != nil {
		return nil, fmt.Errorf("the lab's registry is not built (a lab with real nodes builds it): %w", err)
	}
	return strings.Fields(string(data)), nil
}

// RegistryURL is the registry's address as the nodes reach it.
func RegistryURL(s *State) string {
	return "http://" + net.JoinHostPort(s.Gateway, registry.Port)
}

func init() {
	v := os.Getenv(envRegistryServe)
	if v == "" {
		return
	}
	addr, list, _ := strings.Cut(v, " ")
	data, err := os.ReadFile(list)
	if err == nil {
		var ln net.Listener
		if ln, err = net.Listen("tcp", addr); err == nil {
			err = registry.Serve(ln, strings.Fields(string(data)), os.Stderr)
		}
	}
	fmt.Fprintf(os.Stderr, "homelab-lab registry: %v\n", err)
	os.Exit(1)
}

// mirrorFiles are a real node's hosts.toml files sending every pull of a
// mirrored registry to the lab's registry, as an air-gapped user
// configures a mirror (containerd reads them with config_path set).
func mirrorFiles(s *State) ([]nodeFile, error) {
	var out []nodeFile
	for _, r := range registry.Mirrored {
		data, err := containerd.HostsTOML(containerd.Mirror{Registry: r, URL: RegistryURL(s)})
		if err != nil {
			return nil, err
		}
		out = append(out, nodeFile{Path: containerd.HostsPath(r), Mode: 0o644, Content: data})
	}
	return out, nil
}

// buildRegistry writes the list of image layouts the registry serves: for
// every Kubernetes version the lab has, every image kubeadm lists, with its
// binaries where the official image keeps them (control-plane, etcd and
// kube-proxy in /usr/local/bin, on the PATH kubeadm's manifests rely on;
// CoreDNS at the root), kube-proxy with the iptables and nft of rootfs,
// each pause tag built from its C source; and the Cilium chart's images.
func (l *Lab) buildRegistry(kubeVersion, rootfs string) error {
	start := time.Now()
	root, rootErr := repoRoot()
	if rootErr != nil {
		return rootErr
	}
	kube, err := l.binDir(EnvKubeDir, "kube", append([]string{"kubeadm"}, controlPlaneImages...), root, rootErr, "kubernetes-"+kubeVersion, "KUBE_VERSION="+kubeVersion)
	if err != nil {
		return err
	}
	etcd, err := l.binDir(EnvEtcdDir, "etcd", etcdBins, root, rootErr, "etcd-"+etcdVersion)
	if err != nil {
		return err
	}
	node, err := l.nodeBinary(root, rootErr)
	if err != nil {
		return err
	}
	var imgs []nodeimages.Image
	var pause string
	err = l.eachKubeadmImage(kubeVersion, kube, etcd, node, func(ref string, bins map[string]string) error {
		repo, tag, err := images.Ref(ref)
		if err != nil {
			return err
		}
		img := nodeimages.Image{Ref: ref}
		switch path.Base(repo) {
		case "pause":
			dir, err := l.buildScript(root, "pause", "KUBE_VERSION="+kubeVersion, "PAUSE_VERSION="+tag)
			if err != nil {
				return err
			}
			pause = filepath.Join(dir, "pause")
			img.Files, img.Entrypoint = []nodeimages.File{{Src: pause, Path: "/pause"}}, []string{"/pause"}
		case "coredns":
			if len(bins) == 0 {
				l.logf("lab: the registry has no %s: COREDNS_VERSION=%s infra/tools/build-coredns.sh builds it", ref, tag)
				return nil
			}
			// The official image: the binary alone at the root.
			img.Files, img.Entrypoint = []nodeimages.File{{Src: bins["coredns"], Path: "/coredns"}}, []string{"/coredns"}
		case "kube-proxy":
			if len(bins) == 0 {
				l.logf("lab: the registry has no %s: infra/tools/build-kube.sh builds it", ref)
				return nil
			}
			// kube-proxy programs the node through these, as the
			// official image's Debian-based iptables set does.
			tools, err := nodeimages.FromRoot(rootfs, kubeProxyTools)
			if err != nil {
				return fmt.Errorf("%s: %w", ref, err)
			}
			img.Files = append(tools, nodeimages.File{Src: bins["kube-proxy"], Path: "/usr/local/bin/kube-proxy"})
		default:
			if len(bins) == 0 {
				l.logf("lab: the registry has no %s (nothing builds it yet): a pull of it fails", ref)
				return nil
			}
			for _, b := range slices.Sorted(maps.Keys(bins)) {
				img.Files = append(img.Files, nodeimages.File{Src: bins[b], Path: "/usr/local/bin/" + b})
			}
		}
		imgs = append(imgs, img)
		return nil
	})
	if err != nil {
		return err
	}
	if pause == "" {
		return fmt.Errorf("kubeadm %s lists no pause image", kubeVersion)
	}
	cilium, err := ciliumImages(node, pause, rootfs)
	if err != nil {
		return err
	}
	var list strings.Builder
	for _, img := range append(imgs, cilium...) {
		dir, err := nodeimages.Cached(imageCache(), img)
		if err != nil {
			return err
		}
		fmt.Fprintln(&list, dir)
	}
	if err := os.MkdirAll(l.registryDir(), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(l.registryList(), []byte(list.String()), 0o644); err != nil {
		return err
	}
	l.logf("lab: registry of %d images ready in %s", len(imgs)+len(cilium), time.Since(start).Round(100*time.Millisecond))
	return nil
}

// kubeProxyTools are what kube-proxy runs in each of its modes, from the
// real nodes' Debian: iptables and ip6tables (nf_tables backend, Debian
// 12's default, as the node's own), with their save/restore and the
// extensions they dlopen, nft for the nftables mode, conntrack.
var kubeProxyTools = []string{
	"/usr/sbin/iptables", "/usr/sbin/iptables-save", "/usr/sbin/iptables-restore",
	"/usr/sbin/ip6tables", "/usr/sbin/ip6tables-save", "/usr/sbin/ip6tables-restore",
	"/usr/lib/x86_64-linux-gnu/xtables/",
	"/usr/sbin/nft", "/usr/sbin/conntrack",
}

// ciliumImages are the images of the lab's Cilium chart as a real node
// pulls them: the agent's runs the stand-in agent (homelab-node as
// cilium-agent, and as /install-plugin.sh for its init container, which
// installs the reference CNI plugins of rootfs the image carries); the
// operator's runs pause under the operator's name, as nothing here can
// run an operator and nothing waits on its work.
func ciliumImages(node, pause, rootfs string) ([]nodeimages.Image, error) {
	agent, operator, err := ciliumchart.Images()
	if err != nil {
		return nil, err
	}
	files := []nodeimages.File{
		{Src: node, Path: "/usr/bin/cilium-agent"},
		{Path: "/install-plugin.sh", Link: "/usr/bin/cilium-agent"},
	}
	for _, p := range ciliumagent.Plugins {
		files = append(files, nodeimages.File{Src: filepath.Join(rootfs, ciliumagent.PluginsDir, p), Path: path.Join(ciliumagent.PluginsDir, p)})
	}
	return []nodeimages.Image{{
		Ref:   agent,
		Files: files,
	}, {
		Ref:   operator,
		Files: []nodeimages.File{{Src: pause, Path: "/usr/bin/cilium-operator-generic"}},
	}}, nil
}

// startRegistry starts the registry on the gateway address in nsPath and
// waits until it answers there.
func (l *Lab) startRegistry(ctx context.Context, s *State, nsPath string) error {
	addr := net.JoinHostPort(s.Gateway, registry.Port)
	return l.startGatewayServer(ctx, s, &s.RegistryServer, gatewayServer{
		what: "the lab's registry", env: envRegistryServe + "=" + addr + " " + l.registryList(),
		nsPath: nsPath, addr: addr, log: l.registryLogPath(),
	})
}

func (l *Lab) stopRegistry(s *State) error {
	return stopGatewayServer(&s.RegistryServer, "the lab's registry")
}
