package provider

import (
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
)

func TestSystemdScriptsGolden(t *testing.T) {
	for _, name := range []string{"enable", "start", "restart", "disable", "state"} {
		scriptstest.Golden(t, unitScript(name, "containerd"), "")
	}
}

func TestContainerdReadyGolden(t *testing.T) {
	scriptstest.Golden(t, runtimeReady(), "")
}

func TestKubeletScriptsGolden(t *testing.T) {
	scriptstest.Golden(t, linkClientPair("/var/lib/kubelet/pki/kubelet-client-2026-12-04-23-55-00.pem"), "")
}
