package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/tools"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles"
	"github.com/homelab-dev/homelab/roles/file"
	"github.com/homelab-dev/homelab/roles/pki"
)

func TestWithWorkers(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(tools.RepoRoot(), "inventory", "lab.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{4, 5, 25} {
		out, err := withWorkers(string(data), n)
		if err != nil {
			t.Fatalf("%d workers: %v", n, err)
		}
		p := filepath.Join(t.TempDir(), "lab.yaml")
		if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		// The inventory's own checks: unique names, addresses and MACs,
		// all inside the node CIDR.
		inv, _, err := inventory.Load(p)
		if err != nil {
			t.Fatalf("%d workers: the inventory does not load: %v", n, err)
		}
		if got := len(inv.Workers()); got != n {
			t.Errorf("%d workers asked, %d in the inventory", n, got)
		}
		if got := len(inv.ControlPlanes()); got != 3 {
			t.Errorf("%d workers: %d control-plane nodes", n, got)
		}
	}
	for _, n := range []int{3, 105} {
		if _, err := withWorkers(string(data), n); err == nil {
			t.Errorf("%d workers accepted", n)
		}
	}
}

func TestPSSOf(t *testing.T) {
	p := filepath.Join(t.TempDir(), "smaps_rollup")
	rollup := "55d4c0a8e000-7ffc9a5f3000 ---p 00000000 00:00 0  [rollup]\nRss:               10240 kB\nPss:                4097 kB\nPss_Dirty:          1024 kB\n"
	if err := os.WriteFile(p, []byte(rollup), 0o644); err != nil {
		t.Fatal(err)
	}
	if kb, err := pssOf(p); err != nil || kb != 4097 {
		t.Errorf("pssOf: %d, %v; want 4097", kb, err)
	}
	if kb, err := pssOf("/proc/self/smaps_rollup"); err != nil || kb <= 0 {
		t.Errorf("this process's PSS: %d, %v", kb, err)
	}
}

// The script's sysctl step once ran a File's OnChange as a command after
// it had become the name of a script: "sysctl" alone, which printed its
// usage and stopped the benchmark. Every OnChange the lab's files carry
// renders to the script the provider runs.
func TestOnChangeRendersItsScript(t *testing.T) {
	inv, _, err := inventory.Load(filepath.Join(tools.RepoRoot(), "inventory", "lab.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := pki.New()
	if err != nil {
		t.Fatal(err)
	}
	r, err := roles.Render(inv, b)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, nf := range r.Nodes {
		for _, f := range nf.Files {
			if f.OnChange == "" {
				continue
			}
			seen++
			cmd, err := onChangeCommand(f)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(cmd, "# homelab: onchange/"+f.OnChange) {
				t.Errorf("%s: %q renders\n%s", f.Path, f.OnChange, cmd)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no file of the lab carries an OnChange: the test checks nothing")
	}
	if _, err := onChangeCommand(file.File{Path: "/etc/x", OnChange: "sysctl -p"}); err == nil {
		t.Error("an OnChange that names no script was run as a command")
	}
}
