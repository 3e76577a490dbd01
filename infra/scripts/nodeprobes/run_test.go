package nodeprobes

import (
	"os/exec"
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts"
)

// shells are the oracles: Debian's dash, and bash, which runs these over
// SSH for root on Debian and Ubuntu (the header's pipefail only there).
var shells = []string{"sh", "bash"}

// run runs s in shell, whole (header included), as a node would.
func run(t *testing.T, shell string, s scripts.Script) string {
	t.Helper()
	out, err := exec.Command(shell, "-c", s.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %s: %v: %s\nscript:\n%s", shell, s.Name(), err, out, s)
	}
	return string(out)
}
