// Command nodebin is homelab-node without the kubelet and CRI stand-ins, so
// the init/systemctl integration test builds on its own.
package main

import (
	"os"
	"path/filepath"

	"github.com/homelab-dev/homelab/infra/lab/standin/initd"
	"github.com/homelab-dev/homelab/infra/lab/standin/systemctl"
)

func main() {
	args := os.Args[1:]
	cmd := filepath.Base(os.Args[0])
	if cmd != "systemctl" && cmd != "init" && len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "init":
		os.Exit(initd.Main(args))
	case "systemctl":
		os.Exit(systemctl.Main(args))
	}
	os.Stderr.WriteString("usage: nodebin init|systemctl ...\n")
	os.Exit(2)
}
