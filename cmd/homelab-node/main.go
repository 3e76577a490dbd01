// Command homelab-node is every program an emulated node runs in place of
// the real thing, chosen by the name it is called by (install it as
// /usr/bin/kubelet, /usr/bin/containerd, /usr/bin/systemctl) or by its first
// argument (the lab's image tree holds it as the pause image's pause):
//
//	homelab-node init [--root DIR] [--socket PATH] [--stop-timeout D] [--no-boot]
//	homelab-node systemctl ARGS...
//	homelab-node kubelet ARGS...
//	homelab-node containerd ARGS...
//	homelab-node pause [-v]
//	homelab-node cilium-agent [--config-dir DIR]
//	homelab-node install-plugin.sh
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/homelab-dev/homelab/infra/lab/standin/cri"
	"github.com/homelab-dev/homelab/infra/lab/standin/initd"
	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet"
	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/ciliumagent"
	"github.com/homelab-dev/homelab/infra/lab/standin/pause"
	"github.com/homelab-dev/homelab/infra/lab/standin/systemctl"
)

var commands = map[string]func(args []string) int{
	"init":       initd.Main,
	"systemctl":  systemctl.Main,
	"kubelet":    kubelet.Main,
	"containerd": cri.Main,
	"pause":      pause.Main,
	// The lab's Cilium image on real nodes (docs/lab.md, "Real nodes").
	"cilium-agent":      ciliumagent.MainAgent,
	"install-plugin.sh": ciliumagent.MainInstallPlugin,
}

// dispatch picks the command from argv[0]'s base name, else from argv[1].
func dispatch(argv []string) (string, []string) {
	if len(argv) == 0 {
		return "", nil
	}
	if name := filepath.Base(argv[0]); commands[name] != nil {
		return name, argv[1:]
	}
	if len(argv) > 1 && commands[argv[1]] != nil {
		return argv[1], argv[2:]
	}
	return "", nil
}

func main() {
	name, args := dispatch(os.Args)
	if name == "" {
		fmt.Fprintln(os.Stderr, "usage: homelab-node init|systemctl|kubelet|containerd|pause [ARGS...]\n"+
			"(or call it through a link named after the command)")
		os.Exit(2)
	}
	os.Exit(commands[name](args))
}
