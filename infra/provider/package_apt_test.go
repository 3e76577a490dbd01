package provider

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/homelab-dev/homelab/infra/lab/aptrepo"
	"github.com/homelab-dev/homelab/infra/lab/aptrepo/apttest"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/kubepkg"
	"github.com/homelab-dev/homelab/roles/runtimepkg"
)

// These tests run the Package resource's own steps, unchanged, through
// the real apt and dpkg in a throwaway root (apttest), against a signed
// repository the lab's builder writes (aptrepo), served at pkgs.k8s.io's
// paths on the root's loopback. Only SSH is left out.

// recorder keeps the commands a step ran.
type recorder struct {
	ssh.Executor
	mu   sync.Mutex
	cmds []string
}

func (r *recorder) Run(ctx context.Context, cmd string) (ssh.Result, error) {
	r.mu.Lock()
	r.cmds = append(r.cmds, cmd)
	r.mu.Unlock()
	return r.Executor.Run(ctx, cmd)
}

func (r *recorder) ran(substr string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.cmds {
		if strings.Contains(c, substr) {
			return true
		}
	}
	return false
}

func (r *recorder) reset() { r.mu.Lock(); r.cmds = nil; r.mu.Unlock() }

type aptNode struct {
	root *apttest.Root
	rec  *recorder
	ctx  context.Context
}

func newAptNode(t *testing.T) *aptNode {
	r := apttest.New(t)
	// A fresh node has none of them; this machine may (Google Cloud
	// SDK's kubectl).
	r.Forget(aptrepo.Names...)
	n := &aptNode{root: r, rec: &recorder{Executor: r.Executor()}}
	c := newConfig(func(context.Context, Connection) (ssh.Executor, error) { return n.rec, nil }, realProbes)
	n.ctx = withConfig(t.Context(), &c)
	return n
}

// labRepo writes the lab's repositories of versions, from stand-in
// binaries (scripts printing their name and version), and its key.
func labRepo(t *testing.T, versions ...string) (root string, keyring []byte) {
	t.Helper()
	dir := t.TempDir()
	root, key := apttest.Repos(t, dir, func(v string) aptrepo.Binaries {
		b := aptrepo.Binaries{Version: v}
		for name, p := range map[string]*string{"kubeadm": &b.Kubeadm, "kubelet": &b.Kubelet, "kubectl": &b.Kubectl} {
			*p = filepath.Join(dir, "bin", v, name)
			os.MkdirAll(filepath.Dir(*p), 0o755)
			if err := os.WriteFile(*p, []byte(fmt.Sprintf("#!/bin/sh\necho %s %s\n", name, v)), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return b
	}, versions...)
	keyring, err := os.ReadFile(key.Keyring())
	if err != nil {
		t.Fatal(err)
	}
	return root, keyring
}

// kubernetesPackage is the Package the program declares for a node of an
// inventory using repository (its keyring given, or nil: fetched).
func kubernetesPackage(version, repository string, keyring []byte) PackageArgs {
	inv := &inventory.Inventory{Cluster: inventory.Cluster{KubernetesVersion: version, Packages: inventory.Packages{Manage: true, Repository: repository}}}
	inv.ApplyDefaults()
	in, _ := kubepkg.For(inv, keyring)
	a := PackageArgs{
		Connection: Connection{Node: "cp-1"},
		Names:      in.Packages, Version: in.Version, AnyRevision: true,
		Repository:  &AptRepository{KeyURL: in.KeyURL, Keyring: in.Keyring, SourcesPath: in.SourcesPath, Sources: string(in.Sources)},
		KeepVersion: "set cluster.kubernetesVersion back",
		Enable:      kubepkg.KubeletUnit,
	}
	if in.Key != nil {
		a.Repository.Key = base64.StdEncoding.EncodeToString(in.Key)
	}
	return a
}

func TestKubernetesPackagesRealAptInstallsAndHolds(t *testing.T) {
	root, keyring := labRepo(t, "v1.34.4", "v1.34.3")
	n := newAptNode(t)
	base := n.root.Serve(root)
	repo := base + aptrepo.PathPrefix + inventory.MinorPlaceholder + aptrepo.PathSuffix
	in := kubernetesPackage("v1.34.4", repo, keyring)

	st, err := convergePackage(n.ctx, in, PackageArgs{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != PackageInstalled {
		t.Fatalf("status %q, versions %v", st.Status, st.Versions)
	}
	for _, p := range in.Names {
		if st.Versions[p] != "1.34.4-1.1" {
			t.Errorf("%s %q, want the declared patch 1.34.4-1.1 (1.34.3 is in the repository too)", p, st.Versions[p])
		}
	}
	held := n.root.Sh("apt-mark showhold")
	if held != "kubeadm\nkubectl\nkubelet\n" {
		t.Errorf("held: %q", held)
	}
	if got := n.root.Sh("cat " + kubepkg.SourcesPath); got != string(kubepkg.Sources(base+"/core:/stable:/v1.34/deb/")) {
		t.Errorf("sources list:\n%s", got)
	}
	if got, err := n.rec.Read(n.ctx, kubepkg.KeyringPath); err != nil || string(got) != string(keyring) {
		t.Errorf("the keyring on the node is not the inventory's (%v)", err)
	}
	if out := n.root.Sh("kubeadm"); out != "kubeadm v1.34.4\n" {
		t.Errorf("kubeadm says %q", out)
	}
	n.root.Sh("test -L /etc/systemd/system/multi-user.target.wants/kubelet.service")

	t.Run("converged: reads only", func(t *testing.T) {
		n.rec.reset()
		st, err := convergePackage(n.ctx, in, in)
		if err != nil || st.Status != PackageInstalled {
			t.Fatalf("%q %v", st.Status, err)
		}
		if n.rec.ran("apt-get") || n.rec.ran("apt-mark") {
			t.Errorf("ran apt on a converged node: %q", n.rec.cmds)
		}
	})

	t.Run("unheld by hand: held again, nothing reinstalled", func(t *testing.T) {
		n.root.Sh("apt-mark unhold kubelet")
		l, err := readPackage(n.ctx, n.rec, in)
		if err != nil {
			t.Fatal(err)
		}
		if s := l.status(in); s != PackageNotHeld {
			t.Fatalf("status %q after unhold", s)
		}
		n.rec.reset()
		st, err := convergePackage(n.ctx, in, in)
		if err != nil || st.Status != PackageInstalled {
			t.Fatalf("%q %v", st.Status, err)
		}
		if n.rec.ran("apt-get install") {
			t.Error("reinstalled to hold")
		}
		if held := n.root.Sh("apt-mark showhold"); !strings.Contains(held, "kubelet") {
			t.Errorf("kubelet not held again: %q", held)
		}
	})

	t.Run("another patch declared: refused, nothing changed", func(t *testing.T) {
		older := kubernetesPackage("v1.34.3", repo, keyring)
		n.rec.reset()
		_, err := convergePackage(n.ctx, older, in)
		if err == nil {
			t.Fatal("moved installed Kubernetes packages to another version")
		}
		if !strings.Contains(err.Error(), "kubeadm 1.34.4-1.1") || !strings.Contains(err.Error(), older.KeepVersion) {
			t.Errorf("the refusal: %v", err)
		}
		if n.rec.ran("apt-get") {
			t.Error("ran apt before refusing")
		}
		if v := n.root.Sh("dpkg-query -W -f='${Version}' kubeadm"); v != "1.34.4-1.1" {
			t.Errorf("kubeadm now %s", v)
		}
	})
}

// The default path, no keyring in the inventory: the node fetches the
// repository's Release.key and dearmors it, as kubeadm's guide does.
func TestKubernetesPackagesRealAptFetchesTheKey(t *testing.T) {
	root, keyring := labRepo(t, "v1.35.4")
	n := newAptNode(t)
	base := n.root.Serve(root)
	in := kubernetesPackage("v1.35.4", base+"/core:/stable:/{minor}/deb/", nil)
	if in.Repository.KeyURL != base+"/core:/stable:/v1.35/deb/Release.key" {
		t.Fatalf("key URL %q", in.Repository.KeyURL)
	}
	st, err := convergePackage(n.ctx, in, PackageArgs{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != PackageInstalled || st.Versions["kubelet"] != "1.35.4-1.1" {
		t.Errorf("%q %v", st.Status, st.Versions)
	}
	// What the node dearmored is the lab's keyring, byte for byte.
	got, err := n.rec.Read(n.ctx, kubepkg.KeyringPath)
	if err != nil || string(got) != string(keyring) {
		t.Errorf("fetched keyring differs (%v)", err)
	}
	n.root.Sh("test ! -e " + kubepkg.KeyringPath + ".asc && test ! -e " + kubepkg.KeyringPath + ".tmp")
}

// A repository signed by another key than the inventory's: apt refuses
// it, the step fails, and nothing is installed.
func TestKubernetesPackagesRealAptRefusesAWronglySignedRepository(t *testing.T) {
	root, _ := labRepo(t, "v1.34.4")
	_, otherKeyring := labRepo(t, "v1.34.4")
	n := newAptNode(t)
	base := n.root.Serve(root)
	in := kubernetesPackage("v1.34.4", base+"/core:/stable:/{minor}/deb/", otherKeyring)
	_, err := convergePackage(n.ctx, in, PackageArgs{})
	if err == nil {
		t.Fatal("installed from a repository the keyring does not sign")
	}
	if !strings.Contains(err.Error(), "NO_PUBKEY") && !strings.Contains(err.Error(), "not signed") {
		t.Errorf("the failure does not say the signature is the problem: %v", err)
	}
	l, err := readPackage(n.ctx, n.rec, in)
	if err != nil {
		t.Fatal(err)
	}
	if s := l.status(in); s != PackageMissing {
		t.Errorf("%s after the refusal: %v", s, l.versions)
	}
}

// Docker's repository, through the real apt and dpkg: a node holding the
// distribution's containerd and runc (as pinned packages leave it) gets
// containerd.io from the repository's suite, as the program declares it
// for cluster.containerRuntime.packages.repository, the key fetched from
// URL/gpg and dearmored on the node. apt removes the two packages it
// replaces, holds and all; containerd.io is held, and the containerd on
// the node is the real containerd 2 it carries.
func TestRuntimePackagesRealAptFromDockersRepository(t *testing.T) {
	dir := t.TempDir()
	arch, err := aptrepo.Arch()
	if err != nil {
		toolstest.Missing(t, err.Error())
	}
	containerd2 := toolstest.Built(t, "containerd")
	runc := filepath.Join(toolstest.Built(t, "rootfs"), "usr", "sbin", "runc")
	debs := toolstest.Built(t, "distro-debs")
	debian, err := filepath.Glob(filepath.Join(debs, "containerd_*.deb"))
	runcDeb, _ := filepath.Glob(filepath.Join(debs, "runc_*.deb"))
	debian = append(debian, runcDeb...)
	if err != nil || len(debian) != 2 {
		t.Fatalf("Debian's containerd and runc packages: %v %v", debian, err)
	}
	key, err := aptrepo.OpenKey(filepath.Join(dir, "key"))
	if err != nil {
		t.Fatal(err)
	}
	deb, err := aptrepo.Build(filepath.Join(dir, "debs"), arch, aptrepo.ContainerdIO("2.2.9-1", containerd2, runc))
	if err != nil {
		t.Fatal(err)
	}
	if err := aptrepo.WriteSuite(filepath.Join(dir, "repo", aptrepo.DockerDir), arch, "bookworm", "stable", []string{deb}, key); err != nil {
		t.Fatal(err)
	}

	n := newAptNode(t)
	n.root.Forget("containerd", "runc", runtimepkg.DockerPackage)
	n.root.Sh("dpkg -i " + strings.Join(debian, " ") + " >/dev/null && apt-mark hold containerd runc >/dev/null")
	base := n.root.Serve(filepath.Join(dir, "repo"))
	inv := &inventory.Inventory{Cluster: inventory.Cluster{KubernetesVersion: "v1.35.4", ContainerRuntime: inventory.ContainerRuntime{Manage: true,
		Packages: &inventory.RuntimePackages{Containerd: "2.2.9-1", Repository: &inventory.RuntimeRepository{URL: base + aptrepo.DockerPath, Suite: "bookworm"}}}}}
	inv.ApplyDefaults()
	rt, _ := runtimepkg.For(inv, nil)
	pkg, r := rt.Packages[0], rt.Repository
	in := PackageArgs{Connection: Connection{Node: "gpu-1"}, Names: []string{pkg.Name}, Version: pkg.Version, AnyRevision: pkg.AnyRevision, Replaces: pkg.Replaces,
		Repository: &AptRepository{KeyURL: r.KeyURL, Keyring: r.Keyring, SourcesPath: r.SourcesPath, Sources: string(r.Sources)}}

	st, err := convergePackage(n.ctx, in, PackageArgs{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != PackageInstalled || st.Versions[runtimepkg.DockerPackage] != "2.2.9-1" {
		t.Fatalf("status %q, versions %v", st.Status, st.Versions)
	}
	// dpkg's want and state letters: containerd.io held (h) and installed
	// (i); the two it replaced no longer installed (containerd's
	// configuration files stay, as after any apt remove).
	got := n.root.Sh("for p in containerd runc containerd.io; do echo \"$p $(dpkg-query -W -f='${db:Status-Abbrev}' $p 2>/dev/null)\"; done")
	for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || len(f[1]) < 2 || (f[0] == runtimepkg.DockerPackage) != (f[1][:2] == "hi") || (f[0] != runtimepkg.DockerPackage && f[1][1] == 'i') {
			t.Errorf("dpkg's containerd, runc and containerd.io:\n%s", got)
			break
		}
	}
	if held := n.root.Sh("apt-mark showhold"); held != "containerd.io\n" {
		t.Errorf("held: %q", held)
	}
	if v := n.root.Sh("containerd --version"); !strings.Contains(v, "v2.2.9") {
		t.Errorf("containerd on the node: %q", v)
	}
	// What the node dearmored from URL/gpg is the repository's key.
	want, _ := os.ReadFile(key.Keyring())
	if got, err := n.rec.Read(n.ctx, runtimepkg.KeyringPath); err != nil || string(got) != string(want) {
		t.Errorf("the keyring fetched from %s is not the repository's (%v)", r.KeyURL, err)
	}

	t.Run("converged: reads only", func(t *testing.T) {
		n.rec.reset()
		if st, err := convergePackage(n.ctx, in, in); err != nil || st.Status != PackageInstalled {
			t.Fatalf("%q %v", st.Status, err)
		}
		if n.rec.ran("apt-get") {
			t.Errorf("ran apt on a converged node: %q", n.rec.cmds)
		}
	})
}
