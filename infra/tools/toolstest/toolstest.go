// Package toolstest hands tests the binaries infra/tools builds. It is apart
// from infra/tools so that the product, which finds the same binaries, does
// not link the testing package.
package toolstest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/envvars"
	"github.com/homelab-dev/homelab/infra/tools"
)

// EnvRequire turns a missing tool from a skip into a failure (CI).
const EnvRequire = envvars.RequireTools

// Require returns the binary for a test. Without it the test is skipped
// with the command that builds it, unless HOMELAB_REQUIRE_TOOLS=1 (CI),
// where a missing tool fails the test instead of hiding it.
func Require(t testing.TB, name string) string {
	t.Helper()
	if name == "keepalived" || name == "sshd" {
		p, err := exec.LookPath(name)
		if err != nil {
			p = filepath.Join("/usr/sbin", name)
			if _, serr := os.Stat(p); serr != nil {
				Missing(t, fmt.Sprintf("%s is not installed: apt-get install %s", name, map[string]string{"keepalived": "keepalived", "sshd": "openssh-server"}[name]))
			}
		}
		return p
	}
	p, err := tools.Path(name)
	if err != nil {
		Missing(t, err.Error())
	}
	return p
}

// Missing skips the test for why (a tool, a package or root it needs
// is not there), unless HOMELAB_REQUIRE_TOOLS=1 (CI, as root, after
// setup.sh), where it fails instead: CI never passes with a test unrun.
func Missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(EnvRequire) == "1" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// RequireKube returns a binary of one Kubernetes version's build, as
// Require does for the declared version.
func RequireKube(t testing.TB, name, version string) string {
	t.Helper()
	p := filepath.Join(tools.KubernetesDir(version), name)
	if _, err := os.Stat(p); err != nil {
		Missing(t, fmt.Sprintf("%s %s is not built yet: run KUBE_VERSION=%s %s", name, version, version, tools.Script(name)))
	}
	return p
}

// Built is the directory infra/tools/build-NAME.sh prints: a cached
// build of a tool or a package set (containerd, rootfs, distro-debs),
// made the first time. Missing when the script fails.
func Built(t testing.TB, name string) string {
	t.Helper()
	out, err := exec.Command("bash", filepath.Join(tools.RepoRoot(), "infra", "tools", "build-"+name+".sh")).Output()
	if err != nil {
		Missing(t, "infra/tools/build-"+name+".sh: "+err.Error())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}
