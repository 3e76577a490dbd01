package lab

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/tools"
)

const module = "github.com/homelab-dev/homelab/"

func isLab(p string) bool {
	return p == module+"infra/lab" || strings.HasPrefix(p, module+"infra/lab/")
}

// goList runs go list in the repository.
func goList(t *testing.T, args ...string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goBin, append([]string{"list"}, args...)...)
	cmd.Dir = tools.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// The emulator stays out of the provisioner: no package that runs against
// a real homelab (the provider, the stack, roles, the inventory, doctor,
// verify, the Pulumi program) imports it, so nothing a user's `up` does
// can depend on the lab. Only the lab's own command cmd/homelab-lab and
// the in-node binary cmd/homelab-node may (issue 34). Test imports are
// not counted: tests are where the lab belongs.
func TestOnlyTheLabCommandsImportTheLab(t *testing.T) {
	allowed := map[string]bool{module + "cmd/homelab-lab": true, module + "cmd/homelab-node": true}
	out := goList(t, "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	for _, line := range strings.Split(out, "\n") {
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

// The binaries users run against their machines link nothing of the
// emulator, not even through a package that imports it: its init hooks
// (a node's boot, the lab's apt repository and registry) take a process
// over when their variable is set.
func TestProductBinariesLinkNoLab(t *testing.T) {
	for _, bin := range []string{"./cmd/homelab", "./cmd/pulumi-resource-homelab", "./cmd/homelab-pulumi"} {
		for _, p := range strings.Fields(goList(t, "-deps", bin)) {
			if isLab(p) {
				t.Errorf("%s links the emulator: %s", bin, strings.TrimPrefix(p, module))
			}
		}
	}
}
