package doctor

import (
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
)

// The combined probe as a node receives it: infra/scripts' test checks
// it parses and passes shellcheck, since a syntax error in any part would
// lose every fact of the node at once.
func TestProbeScriptGolden(t *testing.T) {
	scriptstest.Golden(t, probeScript, "")
}
