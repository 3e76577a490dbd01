package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The kubeconfig holds cluster-admin credentials: it is 0600 whatever the
// file it replaces allowed (os.WriteFile keeps an existing file's mode),
// and a reader never finds half of it.
func TestKubeconfigIsPrivate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, []byte("old, longer than the new one"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeKubeconfig(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if data, _ := os.ReadFile(path); string(data) != "new" {
		t.Errorf("content %q", data)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left beside it: %v", entries)
	}
}
