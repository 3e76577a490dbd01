package doctor

import (
	"os/exec"
	"testing"
)

// The combined probe is one valid shell script: a syntax error in any part
// would lose every fact of the node at once.
func TestProbeScriptParses(t *testing.T) {
	if out, err := exec.Command("sh", "-n", "-c", probeScript).CombinedOutput(); err != nil {
		t.Fatalf("sh -n: %v\n%s", err, out)
	}
}
