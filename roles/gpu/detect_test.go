package gpu

import (
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
