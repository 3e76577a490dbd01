package lab

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/tools"
)

// The emulator stays out of the provisioner: no package that runs against
// a real homelab (the provider, the stack, roles, the inventory, doctor,
// verify, the Pulumi program) imports it, so nothing a user's `up` does
// can depend on the lab. Only the lab's own commands in cmd/homelab and
// the in-node binary cmd/homelab-node may (issue 34). Test imports are
// not counted: tests are where the lab belongs.
func TestOnlyTheLabCommandsImportTheLab(t *testing.T) {
	const module = "github.com/homelab-dev/homelab/"
	allowed := map[string]bool{module + "cmd/homelab": true, module + "cmd/homelab-node": true}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goBin, "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	cmd.Dir = tools.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	isLab := func(p string) bool {
		return p == module+"infra/lab" || strings.HasPrefix(p, module+"infra/lab/")
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || isLab(f[0]) || allowed[f[0]] {
			continue
		}
		for _, imp := range f[1:] {
			if isLab(imp) {
				t.Errorf("%s imports the emulator (%s): the provisioner must not depend on the lab", strings.TrimPrefix(f[0], module), strings.TrimPrefix(imp, module))
			}
		}
	}
}
