package nodeprobes_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts/nodeprobes"
	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
	"github.com/homelab-dev/homelab/roles/gpu"
)

func TestGPUDetectGolden(t *testing.T) { scriptstest.Golden(t, nodeprobes.GPUDetect(), "") }

// gpu/detect runs on this machine as on a node, in dash and bash: it
// succeeds whatever the machine has.
func TestGPUDetectRuns(t *testing.T) {
	for _, sh := range []string{"sh", "bash"} {
		out, err := exec.Command(sh, "-c", nodeprobes.GPUDetect().String()).Output()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		d := gpu.ParseDetection(string(out))
		t.Logf("%s, this machine: %d GPU(s) by %s", sh, d.Count(), d.Source())
	}
}

// The PCI scan, in dash and bash, over a tree shaped as sysfs: an NVIDIA
// display controller is found, NVIDIA's audio function and another
// vendor's card are not.
func TestGPUDetectReadsPCI(t *testing.T) {
	root := t.TempDir()
	for dev, files := range map[string][2]string{
		"0000:01:00.0": {"0x10de", "0x030000"},
		"0000:01:00.1": {"0x10de", "0x040300"},
		"0000:02:00.0": {"0x8086", "0x030000"},
	} {
		if err := os.MkdirAll(filepath.Join(root, dev), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string]string{"vendor": files[0], "class": files[1]} {
			if err := os.WriteFile(filepath.Join(root, dev, name), []byte(v+"\n"), 0o444); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, shell := range []string{"sh", "bash"} {
		out, err := exec.Command(shell, "-c", nodeprobes.GPUDetectAt(root).Script().String()).Output()
		if err != nil {
			t.Fatalf("%s: %v: %s", shell, err, out)
		}
		if d := gpu.ParseDetection(string(out)); len(d.PCI) != 1 || d.PCI[0] != "0000:01:00.0 0x030000" {
			t.Errorf("%s: found %v", shell, d.PCI)
		}
		// An NVIDIA device whose class cannot be read is no display
		// controller, and says nothing on stderr (as cat 2>/dev/null did).
		if err := os.Remove(filepath.Join(root, "0000:01:00.0", "class")); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		cmd := exec.Command(shell, "-c", nodeprobes.GPUDetectAt(root).Script().String())
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err = cmd.Output()
		if d := gpu.ParseDetection(string(out)); err != nil || len(d.PCI) != 0 || stderr.Len() != 0 {
			t.Errorf("%s: a device without its class: %v, found %v, stderr %q", shell, err, d.PCI, stderr.String())
		}
		if err := os.WriteFile(filepath.Join(root, "0000:01:00.0", "class"), []byte("0x030000\n"), 0o444); err != nil {
			t.Fatal(err)
		}
	}
}
