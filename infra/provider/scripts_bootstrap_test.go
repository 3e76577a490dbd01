package provider

import (
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
)

func TestBootstrapScriptsGolden(t *testing.T) {
	scriptstest.Golden(t, repairScript("/etc/kubernetes/kubeadm/init.yaml"), "")
}

func TestRejoinScriptsGolden(t *testing.T) {
	a := rejoinArgs{Kubectl: kubectl, Node: "gpu-1"}
	scriptstest.Golden(t, scripts.Render("rejoin/node", a), "")
	scriptstest.Golden(t, scripts.Render("rejoin/lease", a), "")
}
