// Package file is what every renderer produces: a file's bytes and where it
// lands on a node. Renderers never write to disk; the provisioner and the
// CLI do.
package file

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
)

type File struct {
	// Path is absolute, as on the node.
	Path    string
	Mode    os.FileMode
	Content []byte
	// Secret files carry key material or tokens: never log their content,
	// keep them out of plain state.
	Secret bool
	// Transient files are not kept on the node: the step that needs one
	// (a join, with its token) writes it, uses it and removes it.
	Transient bool
	// OnChange names the script (infra/scripts/onchange/NAME.sh, given the
	// file's path) the node runs after the file was written with new
	// content: what makes the running system read it (sysctl -p).
	OnChange string
	// Restarts names the systemd unit that reads the file only when it
	// starts, so a change of it restarts that unit.
	Restarts string
}

// Trigger is the restart trigger of unit: the SHA-256 of every file that
// restarts it, in the order given (renderers sort by path). A service
// whose trigger changed is restarted.
func Trigger(files []File, unit string) string {
	var parts []string
	for _, f := range files {
		if f.Restarts == unit {
			s := sha256.Sum256(f.Content)
			parts = append(parts, hex.EncodeToString(s[:]))
		}
	}
	return strings.Join(parts, ",")
}
