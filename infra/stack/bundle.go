package stack

import (
	"os"
	"path/filepath"

	"github.com/homelab-dev/homelab/roles/pki"
)

// BundlePath is where a stack's secrets bundle lives unless --secrets
// names another: <stateDir>/<stack>/secrets.yaml (stateDir defaults to
// DefaultStateDir).
func BundlePath(stateDir, stackName string) string {
	if stateDir == "" {
		stateDir = DefaultStateDir()
	}
	return filepath.Join(stateDir, stackName, "secrets.yaml")
}

// WriteBundle stores a bundle at path, 0600 in a directory created 0700:
// it is the cluster's root of trust. It returns what it wrote.
func WriteBundle(path string, b *pki.Bundle) ([]byte, error) {
	data, err := b.Marshal()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return nil, err
	}
	// WriteFile keeps the mode of a file that existed.
	return data, os.Chmod(path, 0o600)
}
