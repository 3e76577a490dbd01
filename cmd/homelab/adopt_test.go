package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/adopt"
	"github.com/homelab-dev/homelab/infra/stack"
	"github.com/homelab-dev/homelab/roles/pki"
)

func TestAdoptKeepsOrRefusesAnExistingBundle(t *testing.T) {
	live, err := pki.New()
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.New()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tests := []struct {
		name      string
		existing  *pki.Bundle // nil: no file
		garbage   bool
		force     bool
		write     bool
		refuses   bool
		keepsFile bool
	}{
		{name: "no bundle yet", write: true},
		{name: "this cluster's", existing: live, keepsFile: true},
		{name: "another cluster's", existing: other, refuses: true},
		{name: "another cluster's, --force", existing: other, force: true, write: true},
		{name: "not a bundle", garbage: true, refuses: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, string(rune('a'+i)), "secrets.yaml")
			if tt.existing != nil {
				if _, err := stack.WriteBundle(path, tt.existing); err != nil {
					t.Fatal(err)
				}
			}
			if tt.garbage {
				os.MkdirAll(filepath.Dir(path), 0o700)
				os.WriteFile(path, []byte("hello"), 0o600)
			}
			a := &adopt.Adoption{Bundle: live}
			write, err := checkExistingBundle(path, a, tt.force)
			if tt.refuses {
				if err == nil || !strings.Contains(err.Error(), "--force") || !strings.Contains(err.Error(), path) {
					t.Errorf("want a refusal naming the file and --force, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if write != tt.write {
				t.Errorf("write = %t, want %t", write, tt.write)
			}
			if tt.keepsFile && a.Bundle == live {
				t.Error("the stored bundle (with its own token) should be the one used")
			}
		})
	}
}

func TestAdoptNeedsAnInventory(t *testing.T) {
	if _, stderr, code := run(t, "adopt"); code == 0 || !strings.Contains(stderr, "file") {
		t.Errorf("adopt without -f: exit %d, %q", code, stderr)
	}
}
