package nodeimages

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/tools"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
)

// rootfs is the real nodes' Debian 12 tree (infra/tools/build-rootfs.sh).
func rootfs(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("bash", filepath.Join(tools.RepoRoot(), "infra", "tools", "build-rootfs.sh")).Output()
	if err != nil {
		toolstest.Missing(t, "the real nodes' root filesystem: infra/tools/build-rootfs.sh: "+err.Error())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

// The files FromRoot picks are enough to run the programs with nothing
// else around them: laid out alone and run under chroot, iptables (with
// an extension it dlopens), nft and conntrack start.
func TestFromRootRunsAlone(t *testing.T) {
	root := rootfs(t)
	if os.Geteuid() != 0 {
		toolstest.Missing(t, "chroot needs root")
	}
	files, err := FromRoot(root, []string{"/usr/sbin/iptables", "/usr/sbin/iptables-save", "/usr/lib/x86_64-linux-gnu/xtables/", "/usr/sbin/nft", "/usr/sbin/conntrack"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range files {
		dst := filepath.Join(dir, f.Path)
		os.MkdirAll(filepath.Dir(dst), 0o755)
		if f.Link != "" {
			if err := os.Link(filepath.Join(dir, f.Link), dst); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := os.ReadFile(f.Src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, os.FileMode(f.Mode)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range [][]string{
		{"/usr/sbin/iptables", "--version"},
		{"/usr/sbin/iptables", "-m", "comment", "--help"},
		{"/usr/sbin/iptables-save", "--version"},
		{"/usr/sbin/nft", "--version"},
		{"/usr/sbin/conntrack", "--version"},
	} {
		out, err := exec.Command("chroot", append([]string{dir}, c...)...).CombinedOutput()
		if err != nil {
			t.Errorf("%q: %v: %s", c, err, out)
		}
		if c[0] == "/usr/sbin/iptables" && c[1] == "--version" && !strings.Contains(string(out), "nf_tables") {
			t.Errorf("iptables is not the nf_tables one: %s", out)
		}
	}
	if _, err := FromRoot(root, []string{"/usr/sbin/no-such-tool"}); err == nil {
		t.Error("a path the root lacks was taken")
	}
}
