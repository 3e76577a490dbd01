// Package command is what homelab's binaries share around their cobra
// commands: serving the provider plugin when the Pulumi engine starts the
// binary by the plugin's name, exit codes carried by errors, and the
// inventory flag.
package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/homelab-dev/homelab/infra/provider"
	"github.com/homelab-dev/homelab/infra/stack"
)

// Main runs the binary: the provider plugin when the engine started it by
// the plugin's name (stack.Open links the plugin to the running binary,
// so users install nothing else), else the command root makes, exiting
// with the code its error carries.
func Main(root func() *cobra.Command) {
	if filepath.Base(os.Args[0]) == stack.ProviderBinary {
		if err := provider.Serve(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		return
	}
	if err := root().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(Code(err))
	}
}

// ExitError carries a specific exit code (validate: 1 when invalid; a
// command run in the lab: its own; bad flags: 2).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Exit is err with the exit code the binary ends with.
func Exit(code int, err error) error { return &ExitError{Code: code, Err: err} }

// Code is the exit code for err: its own, else 1.
func Code(err error) int {
	if e, ok := errors.AsType[*ExitError](err); ok {
		return e.Code
	}
	return 1
}

// FileFlag adds the required inventory flag, -f FILE.
func FileFlag(cmd *cobra.Command, path *string) {
	cmd.Flags().StringVarP(path, "file", "f", "", "inventory file (YAML)")
	_ = cmd.MarkFlagRequired("file")
}

// Run runs root with args as a user would, in this process, for tests:
// what it printed and the exit code it would have ended with (an error's
// text is appended to stderr, as Main prints it).
func Run(root *cobra.Command, args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		errb.WriteString(err.Error())
		return out.String(), errb.String(), Code(err)
	}
	return out.String(), errb.String(), 0
}
