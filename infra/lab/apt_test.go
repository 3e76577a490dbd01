package lab

import (
	"fmt"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/lab/aptrepo"
	"github.com/homelab-dev/homelab/infra/lab/aptrepo/apttest"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/kubepkg"
)

// The lab's repository as lab up makes and serves it, installed by the
// real apt and dpkg on a throwaway node: from the cached binaries of every
// Kubernetes version, the kubelet package carrying the stand-in, which
// reports the package's version; the server is the lab's own re-executed
// binary, here in the throwaway node's network namespace instead of the
// gateway's. Not a lab: no namespaces named hl-*, no nodes booted.
func TestLabAptRepositoryInstallsEveryCachedVersion(t *testing.T) {
	if os.Geteuid() != 0 {
		toolstest.Missing(t, "needs root (a throwaway apt root)")
	}
	versions, err := cachedKubeVersions()
	if err != nil || !slices.Contains(versions, "v1.34.4") {
		toolstest.Missing(t, fmt.Sprintf("the tools cache has no kubernetes-v1.34.4 (%v, %v): infra/tools/build-kube.sh", versions, err))
	}
	l := &Lab{Dir: t.TempDir(), Log: testLog{t}}
	start := time.Now()
	got, err := l.buildAptRepo(false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("repository of %v built in %s", got, time.Since(start).Round(time.Second))
	if !slices.Equal(got, versions) {
		t.Errorf("packaged %v, the cache holds %v", got, versions)
	}

	node := apttest.New(t)
	node.Forget(aptrepo.Names...)
	s := &State{Gateway: "127.0.0.1"}
	if err := l.startAptServer(t.Context(), s, node.NetnsPath()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.stopAptServer(s); err != nil {
			t.Error(err)
		}
	})
	keyring, err := os.ReadFile(l.AptKeyringPath())
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Executor().Upload(t.Context(), kubepkg.KeyringPath, keyring, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, v := range versions {
		// The node's sources as the product renders them from an
		// inventory naming the lab's repository, one minor after the
		// other (the next minor replaces the installed packages, as an
		// upgrade's install does).
		inv := &inventory.Inventory{Cluster: inventory.Cluster{KubernetesVersion: v, Packages: inventory.Packages{Manage: true, Repository: AptRepository(s)}}}
		inv.ApplyDefaults()
		in, _ := kubepkg.For(inv, keyring)
		if err := node.Executor().Upload(t.Context(), in.SourcesPath, in.Sources, 0o644); err != nil {
			t.Fatal(err)
		}
		node.Sh("apt-get update -q")
		var pins []string
		for _, p := range in.Packages {
			pins = append(pins, "'"+p+"="+in.Version+"-*'")
		}
		node.Sh("DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-change-held-packages " + strings.Join(pins, " ") + " && apt-mark hold kubeadm kubelet kubectl")
		want := aptrepo.DebianVersion(v)
		if out := node.Sh("dpkg-query -W -f='${Package}=${Version} ' kubeadm kubelet kubectl"); out != "kubeadm="+want+" kubectl="+want+" kubelet="+want+" " {
			t.Errorf("%s: dpkg has %s", v, out)
		}
		if out := node.Sh("kubeadm version -o short"); strings.TrimSpace(out) != v {
			t.Errorf("the packaged kubeadm is %q, want %s", out, v)
		}
		if out := node.Sh("kubelet --version"); strings.TrimSpace(out) != "Kubernetes "+v {
			t.Errorf("the packaged kubelet stand-in says %q, want Kubernetes %s", out, v)
		}
		if out := node.Sh("kubectl version --client -o yaml"); !strings.Contains(out, "gitVersion: "+v) {
			t.Errorf("the packaged kubectl:\n%s", out)
		}
		node.Sh("dpkg --verify kubeadm kubelet kubectl")
		// Its package enabled the kubelet: kubeadm only starts it, and
		// a rebooted node would come back without one otherwise.
		node.Sh("test -L /etc/systemd/system/multi-user.target.wants/kubelet.service")
	}
	if !s.AptServer.Alive() {
		t.Error("the server died")
	}
}

// A packaged lab's node starts as fresh as a real machine before its
// Kubernetes packages: no kubeadm, kubelet or kubectl in its tools layer,
// no kubelet unit or drop-in, no kubelet enabled, none of the packages in
// its dpkg database. An unpackaged lab's node is unchanged.
func TestPackagedLabNodesStartWithoutKubernetesPackages(t *testing.T) {
	if os.Geteuid() != 0 {
		toolstest.Missing(t, "needs root (the disk's opaque directory is a trusted xattr)")
	}
	bins := t.TempDir()
	for _, b := range append(append(slices.Clone(kubeBins), etcdBins...), "homelab-node") {
		if err := os.WriteFile(filepath.Join(bins, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(EnvKubeDir, bins)
	t.Setenv(EnvEtcdDir, bins)
	t.Setenv(EnvNodeBin, filepath.Join(bins, "homelab-node"))
	for _, packaged := range []bool{false, true} {
		l := &Lab{Dir: t.TempDir()}
		if _, err := aptrepo.OpenKey(l.aptDir()); err != nil {
			t.Fatal(err)
		}
		tools, err := l.buildTools("v1.34.4", packaged)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range []string{"kubeadm", "kubelet", "kubectl", "kube-apiserver", "containerd", "etcd"} {
			_, err := os.Stat(filepath.Join(tools, "usr", "bin", b))
			if fromPackage := slices.Contains(aptrepo.PackagedBinaries, b); (err == nil) == (packaged && fromPackage) {
				t.Errorf("packaged=%v: /usr/bin/%s in the tools layer: %v", packaged, b, err == nil)
			}
		}
		if _, err := l.newDisk("cp-1", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE5zq+k7bS8f5r6c3fYb5uIpH3i3m4n5o6p7q8r9s0t1 lab", packaged, SystemStandIn, "eth0", "10.77.0.1"); err != nil {
			t.Fatal(err)
		}
		for _, f := range append(slices.Clone(aptrepo.PackagedImageFiles), wantsDir+"/kubelet.service") {
			p, _ := l.diskPath("cp-1", f)
			if _, err := os.Lstat(p); (err == nil) == packaged {
				t.Errorf("packaged=%v: %s on the new disk: %v", packaged, f, err == nil)
			}
		}
		// A real node: the same files left to the packages, and its
		// dpkg database the rootfs's own, never the machine's.
		if _, err := l.newDisk("gpu-4", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE5zq+k7bS8f5r6c3fYb5uIpH3i3m4n5o6p7q8r9s0t1 lab", packaged, SystemSystemd, "eth0", "10.77.0.1"); err != nil {
			t.Fatal(err)
		}
		// Its apt source is the lab's distribution repository, signed
		// with the lab's key: Debian's mirror is out of the lab's reach.
		if p, _ := l.diskPath("gpu-4", "/etc/apt/sources.list"); func() bool {
			b, err := os.ReadFile(p)
			return err != nil || string(b) != "deb [signed-by="+distributionKeyring+"] http://10.77.0.1/debian/ /\n"
		}() {
			t.Errorf("real, packaged=%v: the node's sources.list is not the lab's distribution repository", packaged)
		}
		for _, f := range append(slices.Clone(aptrepo.PackagedImageFiles), wantsDir+"/kubelet.service") {
			p, _ := l.diskPath("gpu-4", f)
			if _, err := os.Lstat(p); (err == nil) == packaged {
				t.Errorf("real, packaged=%v: %s on the new disk: %v", packaged, f, err == nil)
			}
		}
		if p, _ := l.diskPath("gpu-4", "/var/lib/dpkg/status"); func() bool { _, err := os.Stat(p); return err == nil }() {
			t.Errorf("real, packaged=%v: the machine's dpkg database is on the real node's disk", packaged)
		}
		p, _ := l.diskPath("cp-1", "/var/lib/dpkg/status")
		status, err := os.ReadFile(p)
		if packaged != (err == nil) {
			t.Errorf("packaged=%v: a dpkg database on the disk: %v", packaged, err)
		}
		if packaged && (len(status) == 0 || strings.Contains(string(status), "Package: kubectl\n")) {
			t.Errorf("the packaged node's dpkg database (%d bytes) lists kubectl", len(status))
		}
	}
}

// inventory/lab.yaml names the repository and keyring the default lab
// serves and writes: flipping manage is all a packaged lab run needs.
func TestLabInventoryNamesTheLabRepository(t *testing.T) {
	inv, _, err := inventory.Load(labInventory)
	if err != nil {
		t.Fatal(err)
	}
	s := newState(inv, labInventory, NamesFor(DefaultDir))
	l := &Lab{Dir: DefaultDir}
	p := inv.Cluster.Packages
	if p.Repository != AptRepository(s) || p.Keyring != l.AptKeyringPath() {
		t.Errorf("lab.yaml's packages %+v; the lab serves %s, its keyring is %s", p, AptRepository(s), l.AptKeyringPath())
	}
	if p.Manage || s.Packages {
		t.Error("lab.yaml manages its packages: the end-to-end tests would install through a path no lab run has tried")
	}
}
