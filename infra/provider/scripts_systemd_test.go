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
