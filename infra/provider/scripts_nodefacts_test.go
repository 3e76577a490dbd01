package provider

import (
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
)

// The steps' reads of kubeadm's node facts as a node receives them.
func TestNodefactsScriptsGolden(t *testing.T) {
	cp := KubeadmJoinArgs{ControlPlane: true}
	scriptstest.Golden(t, cp.joinReadScript(), "control-plane")
	scriptstest.Golden(t, KubeadmJoinArgs{}.joinReadScript(), "worker")
	scriptstest.Golden(t, initState(), "init")
	scriptstest.Golden(t, cp.memberCheck(), "member")
	scriptstest.Golden(t, partialScript, "partial")
}
