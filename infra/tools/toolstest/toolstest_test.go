package toolstest

import (
	"github.com/homelab-dev/homelab/infra/envvars"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const childEnv = envvars.ToolstestChild

// Missing skips a test on a developer's machine and fails it in CI: run
// in a child test process with and without HOMELAB_REQUIRE_TOOLS=1.
func TestMissingFailsInCI(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		Missing(t, "frobnicate is not installed: apt-get install frobnicate")
		t.Log("went on after Missing")
		return
	}
	for _, tc := range []struct {
		require  string
		wantFail bool
		want     string
	}{
		{"1", true, "--- FAIL"},
		{"", false, "--- SKIP"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMissingFailsInCI$", "-test.v")
		cmd.Env = append(os.Environ(), childEnv+"=1", EnvRequire+"="+tc.require)
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != tc.wantFail || !strings.Contains(string(out), tc.want) ||
			!strings.Contains(string(out), "apt-get install frobnicate") || strings.Contains(string(out), "went on") {
			t.Errorf("%s=%q: error %v, output:\n%s", EnvRequire, tc.require, err, out)
		}
	}
}
