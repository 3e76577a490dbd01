package main

import (
	"testing"

	"github.com/homelab-dev/homelab/cmd/internal/command"
)

// run runs homelab-lab with args as a user would, in this process.
func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return command.Run(newRootCommand(), args...)
}
