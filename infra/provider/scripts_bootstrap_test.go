package provider

import (
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

func TestBootstrapScriptsGolden(t *testing.T) {
	scriptstest.Golden(t, repairScript("/etc/kubernetes/kubeadm/init.yaml"), "")
	scriptstest.Golden(t, scripts.Render("bootstrap/readyz", readyzArgs{Kubectl: kubectl}), "")
	scriptstest.Golden(t, scripts.Render("bootstrap/peer", peerArgs{Kubectl: kubectl, AdminConf: adminConf, MemberDir: nodefacts.EtcdMemberDir}), "")
}

func TestRejoinScriptsGolden(t *testing.T) {
	a := rejoinArgs{Kubectl: kubectl, Node: "gpu-1"}
	scriptstest.Golden(t, scripts.Render("rejoin/node", a), "")
	scriptstest.Golden(t, scripts.Render("rejoin/delete-node", a), "")
	scriptstest.Golden(t, scripts.Render("rejoin/lease", a), "")
}
