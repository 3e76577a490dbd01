package main

import "github.com/google/renameio/v2"

// writeKubeconfig writes the cluster-admin kubeconfig 0600 whatever file
// it replaces: os.WriteFile would keep an existing file's mode, and a
// kubeconfig left world-readable hands out cluster-admin. It goes through
// a new temporary file (created 0600) renamed into place, so no reader
// ever sees it with another mode or half written (renameio: a temporary
// file of its own in the same directory, synced, then renamed).
func writeKubeconfig(path string, data []byte) error {
	// Not renameio.WriteFile, which keeps an existing file's mode.
	f, err := renameio.NewPendingFile(path, renameio.WithStaticPermissions(0o600))
	if err != nil {
		return err
	}
	defer f.Cleanup()
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.CloseAtomicallyReplace()
}
