// Command homelab-pulumi is the Pulumi program for `pulumi up` with the
// Pulumi CLI (Pulumi.yaml names it). It is the same program `homelab up`
// runs inline, and it doubles as the provider plugin, so nothing else needs
// installing: at start it links itself where Pulumi.yaml tells the engine
// to find pulumi-resource-homelab.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/homelab-dev/homelab/infra/program"
	"github.com/homelab-dev/homelab/infra/provider"
	"github.com/homelab-dev/homelab/infra/stack"
)

// pluginDir is Pulumi.yaml's plugins.providers path, relative to the
// project directory the program runs in.
const pluginDir = ".bin"

func main() {
	if filepath.Base(os.Args[0]) == stack.ProviderBinary {
		if err := provider.Serve(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		return
	}
	if err := linkProvider(); err != nil {
		fmt.Fprintln(os.Stderr, "error: linking the provider plugin:", err)
		os.Exit(1)
	}
	pulumi.Run(program.Main)
}

func linkProvider() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(pluginDir, 0o755); err != nil {
		return err
	}
	link := filepath.Join(pluginDir, stack.ProviderBinary)
	if cur, err := os.Readlink(link); err == nil && cur == self {
		return nil
	}
	os.Remove(link)
	return os.Symlink(self, link)
}
