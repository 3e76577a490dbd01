package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/envvars"
	"github.com/homelab-dev/homelab/infra/lab/standin/images"
	"github.com/homelab-dev/homelab/infra/tools"
)

// fakeKube makes a tools-cache directory of Kubernetes version v whose
// kubeadm lists refs as `kubeadm config images list` does.
func fakeKube(t *testing.T, dir string, refs ...string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nprintf '%s\\n' " + strings.Join(refs, " ") + "\n"
	exe(t, filepath.Join(dir, "kubeadm"), script)
	for _, b := range append([]string{"kubectl"}, controlPlaneImages...) {
		exe(t, filepath.Join(dir, b), "#!/bin/sh\necho "+b+" "+filepath.Base(dir)+"\n")
	}
}

func exe(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	sa, err := os.Stat(a)
	if err != nil {
		t.Errorf("%v", err)
		return false
	}
	sb, err := os.Stat(b)
	if err != nil {
		t.Errorf("%v", err)
		return false
	}
	return os.SameFile(sa, sb)
}

// Every etcd tag kubeadm lists gets the cached etcd of its version, the
// pause image the stand-in binary (whole, however many versions list it),
// and an etcd tag whose etcd is not cached is left out, logged.
func TestImageTreeHasEachVersionsEtcdAndPause(t *testing.T) {
	cache := t.TempDir()
	t.Setenv(envvars.Cache, cache)
	v134, v135, v136 := tools.KubernetesDir("v1.34.4"), tools.KubernetesDir("v1.35.4"), tools.KubernetesDir("v1.36.0")
	fakeKube(t, v134, "registry.k8s.io/kube-apiserver:v1.34.4", "registry.k8s.io/kube-controller-manager:v1.34.4",
		"registry.k8s.io/kube-scheduler:v1.34.4", "registry.k8s.io/kube-proxy:v1.34.4", "registry.k8s.io/coredns/coredns:v1.12.1",
		"registry.k8s.io/pause:3.10.1", "registry.k8s.io/etcd:3.6.5-0")
	fakeKube(t, v135, "registry.k8s.io/kube-apiserver:v1.35.4", "registry.k8s.io/kube-controller-manager:v1.35.4",
		"registry.k8s.io/kube-scheduler:v1.35.4", "registry.k8s.io/pause:3.10.1", "registry.k8s.io/etcd:3.6.6-0")
	fakeKube(t, v136, "registry.k8s.io/kube-apiserver:v1.36.0", "registry.k8s.io/kube-controller-manager:v1.36.0",
		"registry.k8s.io/kube-scheduler:v1.36.0", "registry.k8s.io/pause:3.10.1", "registry.k8s.io/etcd:3.6.9-0")
	// The lab's etcd (tools.EtcdVersion) from its own directory, the
	// upgrade's from the cache; 3.6.9 is not cached.
	labEtcd := filepath.Join(t.TempDir(), "etcd")
	for _, d := range []string{labEtcd, tools.EtcdDir("v3.6.6")} {
		for _, b := range etcdBins {
			exe(t, filepath.Join(d, b), "#!/bin/sh\necho "+b+" "+d+"\n")
		}
	}
	node := filepath.Join(t.TempDir(), "homelab-node")
	exe(t, node, "#!/bin/sh\necho the stand-ins\n")
	nodeContent, _ := os.ReadFile(node)

	var log strings.Builder
	l := &Lab{Dir: t.TempDir(), Log: &log}
	root := filepath.Join(t.TempDir(), "images")
	if err := l.buildImages(root, "v1.34.4", v134, labEtcd, node); err != nil {
		t.Fatal(err)
	}
	s := images.Store{Dir: root}
	for ref, want := range map[string]string{
		"registry.k8s.io/etcd:3.6.5-0":                    filepath.Join(labEtcd, "etcd"),
		"registry.k8s.io/etcd:3.6.6-0":                    filepath.Join(tools.EtcdDir("v3.6.6"), "etcd"),
		"registry.k8s.io/kube-apiserver:v1.35.4":          filepath.Join(v135, "kube-apiserver"),
		"registry.k8s.io/kube-controller-manager:v1.34.4": filepath.Join(v134, "kube-controller-manager"),
		"registry.k8s.io/pause:3.10.1":                    node,
	} {
		name := filepath.Base(want)
		if name == "homelab-node" {
			name = "pause"
		}
		p, err := s.Binary(ref, name)
		if err != nil {
			t.Errorf("%s: %v", ref, err)
			continue
		}
		if !sameFile(t, p, want) {
			t.Errorf("%s's %s is not %s", ref, name, want)
		}
	}
	for _, ref := range []string{"registry.k8s.io/etcd:3.6.6-0", "registry.k8s.io/etcd:3.6.5-0"} {
		if _, err := s.Binary(ref, "etcdctl"); err != nil {
			t.Errorf("%s: %v", ref, err)
		}
	}
	if !s.Has("registry.k8s.io/coredns/coredns:v1.12.1") || s.Has("registry.k8s.io/etcd:3.6.9-0") {
		t.Errorf("coredns present %v (want true), etcd 3.6.9 present %v (want false)",
			s.Has("registry.k8s.io/coredns/coredns:v1.12.1"), s.Has("registry.k8s.io/etcd:3.6.9-0"))
	}
	if !strings.Contains(log.String(), "no registry.k8s.io/etcd:3.6.9-0 image (etcd v3.6.9 is not cached") {
		t.Errorf("log:\n%s", log.String())
	}
	// Three versions list the same pause image: linking it again must not
	// have emptied the stand-in binary.
	if got, _ := os.ReadFile(node); string(got) != string(nodeContent) {
		t.Errorf("homelab-node is now %q", got)
	}
}

// linkOrCopy onto an existing link to the same file leaves it whole (a
// copy over itself would truncate it).
func TestLinkOrCopyOntoItself(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	exe(t, src, "#!/bin/sh\nexit 0\n")
	for range 2 {
		if err := linkOrCopy(src, dst); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile(src); string(b) != "#!/bin/sh\nexit 0\n" {
		t.Errorf("source now %q", b)
	}
}
