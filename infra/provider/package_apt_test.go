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
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/kubepkg"
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
