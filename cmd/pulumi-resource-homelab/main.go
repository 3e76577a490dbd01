// Command pulumi-resource-homelab is the homelab provider plugin for the
// Pulumi CLI. Pulumi.yaml names this folder as the plugin's path and its
// PulumiPlugin.yaml says `runtime: go`, so the engine has the Go language
// host build it from this checkout: the provider always matches the
// program beside it, and nothing needs installing first. (`homelab up`
// serves the same provider from the homelab binary itself.)
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/homelab-dev/homelab/infra/provider"
)

func main() {
	if err := provider.Serve(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
