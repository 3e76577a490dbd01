// Package file is what every renderer produces: a file's bytes and where it
// lands on a node. Renderers never write to disk; the provisioner and the
// CLI do.
package file

import "os"

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
}
