// Command homelab-pulumi is the Pulumi program for `pulumi up` with the
// Pulumi CLI (Pulumi.yaml's main). It is the same program `homelab up` runs
// inline through the Automation API; the provider it uses is built from
// cmd/pulumi-resource-homelab.
package main

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/homelab-dev/homelab/infra/program"
)

func main() {
	pulumi.Run(program.Main)
}
