package main

import (
	"bytes"
	"testing"
)

// run runs homelab-lab with args as a user would, in this process.
func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	root := newRootCommand()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		errb.WriteString(err.Error())
		return out.String(), errb.String(), exitCode(err)
	}
	return out.String(), errb.String(), 0
}
