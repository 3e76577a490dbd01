package provider

import (
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
)

func TestFileScriptsGolden(t *testing.T) {
	scriptstest.Golden(t, removeFile("/etc/systemd/system/keepalived.service.d/homelab.conf"), "")
	scriptstest.Golden(t, controlPlaneRuns(), "")
}
