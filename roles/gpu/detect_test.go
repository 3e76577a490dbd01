package gpu

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseDetection(t *testing.T) {
	for _, tc := range []struct {
		name     string
		out      string
		count    int
		source   string
		driverOK bool
	}{
		{"nothing (the emulated homelab)", "", 0, SourceNone, false},
		{"driver answers", "smi=GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-1)\nsmi=GPU 1: NVIDIA GeForce RTX 4090 (UUID: GPU-2)\ndev=/dev/nvidia0\ndev=/dev/nvidia1\npci=0000:01:00.0 0x030000\npci=0000:02:00.0 0x030000\n", 2, SourceNvidiaSMI, true},
		{"card without a driver", "pci=0000:01:00.0 0x030000\n", 1, SourcePCI, false},
		{"3D controller (data-centre card)", "pci=0000:3b:00.0 0x030200\n", 1, SourcePCI, false},
		{"device nodes only (no sysfs)", "dev=/dev/nvidia0\n", 1, SourceDevNodes, false},
		{"nvidia-smi failing prints no GPU lines", "smi=NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\npci=0000:01:00.0 0x030000\n", 1, SourcePCI, false},
		{"noise ignored", "Welcome!\nsmi=\n=x\n", 0, SourceNone, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := ParseDetection(tc.out)
			if d.Count() != tc.count || d.Source() != tc.source || d.DriverAnswers() != tc.driverOK || d.Present() != (tc.count > 0) {
				t.Errorf("count %d source %q driver %v, want %d %q %v (%+v)", d.Count(), d.Source(), d.DriverAnswers(), tc.count, tc.source, tc.driverOK, d)
			}
		})
	}
}

// The script runs on this machine as on a node: a valid shell program
// whose every line parses, whatever the machine has.
func TestDetectScriptRuns(t *testing.T) {
	out, err := exec.Command("sh", "-c", DetectScript).Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	d := ParseDetection(string(out))
	t.Logf("this machine: %d GPU(s) by %s", d.Count(), d.Source())
}

// The PCI scan, in dash and bash, over a tree shaped as sysfs: an NVIDIA
// display controller is found, NVIDIA's audio function and another
// vendor's card are not.
func TestDetectScriptReadsPCI(t *testing.T) {
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
		out, err := exec.Command(shell, "-c", detectScript(root)).Output()
		if err != nil {
			t.Fatalf("%s: %v: %s", shell, err, out)
		}
		if d := ParseDetection(string(out)); len(d.PCI) != 1 || d.PCI[0] != "0000:01:00.0 0x030000" {
			t.Errorf("%s: found %v", shell, d.PCI)
		}
		// An NVIDIA device whose class cannot be read is no display
		// controller, and says nothing on stderr (as cat 2>/dev/null did).
		if err := os.Remove(filepath.Join(root, "0000:01:00.0", "class")); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		cmd := exec.Command(shell, "-c", detectScript(root))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err = cmd.Output()
		if d := ParseDetection(string(out)); err != nil || len(d.PCI) != 0 || stderr.Len() != 0 {
			t.Errorf("%s: a device without its class: %v, found %v, stderr %q", shell, err, d.PCI, stderr.String())
		}
		if err := os.WriteFile(filepath.Join(root, "0000:01:00.0", "class"), []byte("0x030000\n"), 0o444); err != nil {
			t.Fatal(err)
		}
	}
}
