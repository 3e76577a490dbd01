package images

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestRef(t *testing.T) {
	for _, tc := range []struct{ in, repo, tag string }{
		{"registry.k8s.io/kube-apiserver:v1.34.4", "registry.k8s.io/kube-apiserver", "v1.34.4"},
		{"registry.k8s.io/coredns/coredns:v1.12.1", "registry.k8s.io/coredns/coredns", "v1.12.1"},
		{"registry.k8s.io/etcd:3.6.5-0", "registry.k8s.io/etcd", "3.6.5-0"},
		{"localhost:5000/app", "localhost:5000/app", "latest"},
		{"nginx", "docker.io/library/nginx", "latest"},
		{"cilium/cilium:v1.18.4", "docker.io/cilium/cilium", "v1.18.4"},
	} {
		repo, tag, err := Ref(tc.in)
		if err != nil || repo != tc.repo || tag != tc.tag {
			t.Errorf("Ref(%q) = %q, %q, %v; want %q, %q", tc.in, repo, tag, err, tc.repo, tc.tag)
		}
	}
	for _, bad := range []string{"", "registry.k8s.io/pause@sha256:abc", "registry.k8s.io/../etc:x", "/abs:1", "registry.k8s.io/x:"} {
		if _, _, err := Ref(bad); err == nil {
			t.Errorf("Ref(%q) accepted", bad)
		}
	}
}

func TestStore(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(t.TempDir(), "kube-apiserver")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := func(src, dst string) error { return os.Link(src, dst) }
	if err := Add(root, "registry.k8s.io/kube-apiserver:v1.34.4", map[string]string{"kube-apiserver": bin}, link); err != nil {
		t.Fatal(err)
	}
	if err := Add(root, "registry.k8s.io/pause:3.10.1", nil, link); err != nil {
		t.Fatal(err)
	}
	s := Store{Dir: root}
	if !s.Has("registry.k8s.io/pause:3.10.1") || !s.Has("registry.k8s.io/kube-apiserver:v1.34.4") {
		t.Error("an added image is missing")
	}
	p, err := s.Binary("registry.k8s.io/kube-apiserver:v1.34.4", "kube-apiserver")
	if err != nil || p != filepath.Join(root, "registry.k8s.io/kube-apiserver/v1.34.4/kube-apiserver") {
		t.Errorf("Binary = %q, %v", p, err)
	}
	// Another version of the same image is not there: not found, named.
	if _, err := s.Binary("registry.k8s.io/kube-apiserver:v1.35.4", "kube-apiserver"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a version the store lacks: %v, want ErrNotFound", err)
	}
	// An image that runs nothing has no binary.
	if _, err := s.Binary("registry.k8s.io/pause:3.10.1", "pause"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("pause's binary: %v, want an error that is not ErrNotFound", err)
	}
}
