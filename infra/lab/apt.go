package lab

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/homelab-dev/homelab/infra/envvars"
	"github.com/homelab-dev/homelab/infra/lab/aptrepo"
	"github.com/homelab-dev/homelab/inventory"
)

// The lab's apt repository (inventory cluster.packages.manage): built
// from every Kubernetes version the tools cache holds, signed with the
// lab's key, served in the gateway namespace at pkgs.k8s.io's paths, so
// nodes reach it on the lab's network only.

// envAptServe carries the server's address and directory to the process
// the lab starts for it; the package's init() acts on it, as for a boot.
const envAptServe = envvars.LabAptServe

// aptPort is the server's port on the gateway address.
const aptPort = "80"

func (l *Lab) aptDir() string     { return filepath.Join(l.Dir, "apt") }
func (l *Lab) aptRepoDir() string { return filepath.Join(l.aptDir(), "repo") }
func (l *Lab) aptLogPath() string { return filepath.Join(l.aptDir(), "server.log") }

// AptKeyringPath is the lab key's keyring (inventory/lab.yaml's
// cluster.packages.keyring).
func (l *Lab) AptKeyringPath() string { return filepath.Join(l.aptDir(), aptrepo.KeyringName) }

// AptRepository is the repository URL template nodes of this lab reach
// (inventory/lab.yaml's cluster.packages.repository).
func AptRepository(s *State) string {
	return aptrepo.Repository(s.Gateway)
}

func init() {
	v := os.Getenv(envAptServe)
	if v == "" {
		return
	}
	addr, dir, _ := strings.Cut(v, " ")
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		err = aptrepo.Serve(ln, dir)
	}
	fmt.Fprintf(os.Stderr, "homelab-lab apt repository: %v\n", err)
	os.Exit(1)
}

// cachedKubeVersions are the Kubernetes versions whose kubeadm and kubectl
// the tools cache holds (build-kube.sh's kubernetes-vX.Y.Z), oldest first.
func cachedKubeVersions() ([]string, error) {
	entries, err := os.ReadDir(toolCache())
	if err != nil {
		return nil, err
	}
	var vs []*version.Version
	for _, e := range entries {
		v, ok := strings.CutPrefix(e.Name(), "kubernetes-")
		if !ok || !e.IsDir() || checkBins(filepath.Join(toolCache(), e.Name()), []string{"kubeadm", "kubectl"}) != nil {
			continue
		}
		if sv, err := version.ParseSemantic(v); err == nil && strings.HasPrefix(v, "v") {
			vs = append(vs, sv)
		}
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].LessThan(vs[j]) })
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = "v" + v.String()
	}
	return out, nil
}

// buildAptRepo writes the lab's repositories, one per minor, of every
// cached version (the packages themselves are cached by version outside
// the lab), and returns the versions. The kubelet package carries the
// real kubelet for real nodes, else the stand-in.
func (l *Lab) buildAptRepo(real bool) ([]string, error) {
	start := time.Now()
	arch, err := aptrepo.Arch()
	if err != nil {
		return nil, err
	}
	versions, err := cachedKubeVersions()
	if err != nil {
		return nil, err
	}
	if len(versions) == 0 {
		return nil, fmt.Errorf("the tools cache %s holds no Kubernetes binaries to package: run infra/tools/build-kube.sh", toolCache())
	}
	root, rootErr := repoRoot()
	key, err := aptrepo.OpenKey(l.aptDir())
	if err != nil {
		return nil, err
	}
	byMinor := map[string][]string{}
	for _, v := range versions {
		kube := filepath.Join(toolCache(), "kubernetes-"+v)
		kubelet, debs := filepath.Join(kube, "kubelet"), "kubernetes-debs-real-"+v
		if !real {
			if kubelet, err = l.kubeletStandIn(root, rootErr, v); err != nil {
				return nil, err
			}
			debs = "kubernetes-debs-" + v
		}
		specs, err := aptrepo.Specs(aptrepo.Binaries{Version: v, Kubeadm: filepath.Join(kube, "kubeadm"), Kubectl: filepath.Join(kube, "kubectl"), Kubelet: kubelet, StandIn: !real})
		if err != nil {
			return nil, err
		}
		m := aptrepo.Minor(v)
		if _, ok := byMinor[m]; !ok {
			specs = append(specs, aptrepo.Dependencies(m)...)
		}
		for _, sp := range specs {
			deb, err := aptrepo.Build(filepath.Join(toolCache(), debs), arch, sp)
			if err != nil {
				return nil, err
			}
			byMinor[m] = append(byMinor[m], deb)
		}
	}
	for m, debs := range byMinor {
		if err := aptrepo.Write(filepath.Join(l.aptRepoDir(), m), arch, m, debs, key); err != nil {
			return nil, err
		}
	}
	l.logf("lab: apt repository of Kubernetes %s ready in %s", strings.Join(versions, ", "), time.Since(start).Round(100*time.Millisecond))
	return versions, nil
}

// checkAptInventory says where an inventory managing its packages would
// miss the lab's repository: its version not packaged, another URL or
// keyring than the lab's.
func (l *Lab) checkAptInventory(s *State, inv *inventory.Inventory, versions []string) error {
	if !slices.Contains(versions, inv.Cluster.KubernetesVersion) {
		return fmt.Errorf("cluster.kubernetesVersion %s is not in the lab's apt repository (%s): build it with KUBE_VERSION=%s infra/tools/build-kube.sh",
			inv.Cluster.KubernetesVersion, strings.Join(versions, ", "), inv.Cluster.KubernetesVersion)
	}
	if want := AptRepository(s); inv.Cluster.Packages.Repository != want {
		l.logf("lab: warning: the inventory's cluster.packages.repository is %s but this lab serves %s", inv.Cluster.Packages.Repository, want)
	}
	if inv.Cluster.Packages.Keyring != l.AptKeyringPath() {
		l.logf("lab: warning: the inventory's cluster.packages.keyring is %q but this lab's key is %s", inv.Cluster.Packages.Keyring, l.AptKeyringPath())
	}
	return nil
}

// startAptServer starts the repository's server on the gateway address in
// nsPath, the gateway namespace, and waits until it answers there.
func (l *Lab) startAptServer(ctx context.Context, s *State, nsPath string) error {
	addr := net.JoinHostPort(s.Gateway, aptPort)
	return l.startGatewayServer(ctx, s, &s.AptServer, gatewayServer{
		what: "the apt repository's server", env: envAptServe + "=" + addr + " " + l.aptRepoDir(),
		nsPath: nsPath, addr: addr, log: l.aptLogPath(),
	})
}

func (l *Lab) stopAptServer(s *State) error {
	return stopGatewayServer(&s.AptServer, "the apt repository's server")
}

// freshDpkg is a new node's dpkg database: the machine's, without the
// packages the lab's repository provides. A fresh node has none of them,
// and one this machine has (Google Cloud SDK's kubectl, epoch 1) would
// outrank every version the repository holds.
func freshDpkg() (nodeFile, error) {
	const status = "/var/lib/dpkg/status"
	data, err := os.ReadFile(status)
	if err != nil {
		return nodeFile{}, err
	}
	return nodeFile{Path: status, Mode: 0o644, Content: aptrepo.Forget(data, aptrepo.Names...)}, nil
}

// distributionSuite is the Debian release the real nodes' rootfs is
// (infra/tools/build-rootfs.sh).
const distributionSuite = "bookworm"

// distributionKeyring is where a real node keeps the lab key that signs
// its distribution repository.
const distributionKeyring = "/etc/apt/keyrings/homelab-lab-debian.gpg"

// buildDistributionRepo writes the real nodes' distribution repository,
// which stands in for Debian's mirror (no node reaches the Internet):
// Debian's own containerd and runc packages at the rootfs's versions
// (infra/tools/build-distro-debs.sh), signed with the lab's key. A node
// that lacks them installs them from there (cluster.containerRuntime.packages).
func (l *Lab) buildDistributionRepo() error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	dir, err := l.buildScript(root, "distro-debs")
	if err != nil {
		return err
	}
	debs, err := filepath.Glob(filepath.Join(dir, "*.deb"))
	if err != nil || len(debs) == 0 {
		return fmt.Errorf("%s holds no packages: run infra/tools/build-distro-debs.sh (%v)", dir, err)
	}
	arch, err := aptrepo.Arch()
	if err != nil {
		return err
	}
	key, err := aptrepo.OpenKey(l.aptDir())
	if err != nil {
		return err
	}
	if err := aptrepo.WriteDistribution(filepath.Join(l.aptRepoDir(), aptrepo.DistributionDir), arch, distributionSuite, debs, key); err != nil {
		return err
	}
	return l.buildDockerRepo(root, arch, key)
}

// buildDockerRepo writes the lab's stand-in for Docker's repository
// (DockerRepository): containerd.io made of the containerd 2 the tools
// cache builds (infra/tools/build-containerd.sh) and Debian's runc from
// the real nodes' rootfs, in Docker's layout for the rootfs's suite. The
// package is built once per containerd build, beside it.
func (l *Lab) buildDockerRepo(root, arch string, key *aptrepo.Key) error {
	ctrd, err := l.buildScript(root, "containerd")
	if err != nil {
		return err
	}
	rootfs, err := l.buildScript(root, "rootfs")
	if err != nil {
		return err
	}
	version := strings.TrimPrefix(filepath.Base(ctrd), "containerd-v") + "-1"
	deb, err := aptrepo.Build(filepath.Join(ctrd, "debs"), arch, aptrepo.ContainerdIO(version, ctrd, filepath.Join(rootfs, "usr", "sbin", "runc")))
	if err != nil {
		return err
	}
	return aptrepo.WriteSuite(filepath.Join(l.aptRepoDir(), aptrepo.DockerDir), arch, distributionSuite, "stable", []string{deb}, key)
}

// DockerRepository is the URL of the lab's stand-in for Docker's
// repository (cluster.containerRuntime.packages.repository.url), whose
// suite is DistributionSuite; the lab's key signs it (AptKeyringPath).
func DockerRepository(s *State) string { return "http://" + s.Gateway + aptrepo.DockerPath }

// DistributionSuite is the real nodes' Debian release.
const DistributionSuite = distributionSuite

// distributionFiles are a real node's apt sources: the lab's distribution
// repository at gateway, in place of Debian's mirror, and the key it is
// signed with.
func (l *Lab) distributionFiles(gateway string) ([]nodeFile, error) {
	key, err := os.ReadFile(l.AptKeyringPath())
	if err != nil {
		return nil, fmt.Errorf("the lab's apt key: %w", err)
	}
	return []nodeFile{
		{Path: "/etc/apt/sources.list", Mode: 0o644, Content: []byte(aptrepo.DistributionSources(gateway, distributionKeyring))},
		{Path: distributionKeyring, Mode: 0o644, Content: key},
	}, nil
}
