package etcdbackup

import (
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
)

// The restore's probe as a node receives it.
func TestProbeScriptGolden(t *testing.T) {
	scriptstest.Golden(t, probe, "etcdbackup")
}
