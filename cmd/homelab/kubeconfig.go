package main

import (
	"os"
	"path/filepath"
)

// writeKubeconfig writes the cluster-admin kubeconfig 0600 whatever file
// it replaces: os.WriteFile would keep an existing file's mode, and a
// kubeconfig left world-readable hands out cluster-admin. It goes through
// a new temporary file (created 0600) renamed into place, so no reader
// ever sees it with another mode or half written.
func writeKubeconfig(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
