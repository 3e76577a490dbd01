package adopt

import (
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
)

// Adopt's probe as a node receives it.
func TestProbeScriptGolden(t *testing.T) {
	scriptstest.Golden(t, probeScript, "adopt")
}
