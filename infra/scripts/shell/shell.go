// Package shell holds what every command the provisioner sends to a node's
// POSIX shell is built with, so that a value reaches the node as one word
// however it is spelled.
package shell

import "strings"

// Quote makes s one word for a POSIX shell (sh, dash, bash): single quotes
// keep every byte as it is, and a single quote inside is closed, escaped
// and reopened. The empty string is the empty word ”.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
