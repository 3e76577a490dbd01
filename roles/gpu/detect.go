package gpu

import "strings"

// Detection is what a node shows of NVIDIA GPUs, as the gpu/detect script
// (infra/scripts) lists it: both the provider (whether to install the
// toolkit) and doctor (declared vs detected) run it.
type Detection struct {
	// SMI are nvidia-smi -L's lines ("GPU 0: NVIDIA GeForce RTX 4090 (UUID: ...)").
	SMI []string
	// DevNodes are /dev/nvidia0, /dev/nvidia1, ...
	DevNodes []string
	// PCI are the NVIDIA display controllers: "0000:01:00.0 0x030000".
	PCI []string
}

// Detection sources, most trustworthy first.
const (
	SourceNvidiaSMI = "nvidia-smi -L"
	SourcePCI       = "PCI display devices"
	SourceDevNodes  = "/dev/nvidia*"
	SourceNone      = "none"
)

// ParseDetection reads the gpu/detect script's output. Lines it does not know are
// ignored (a login banner, a driver's complaint).
func ParseDetection(out string) Detection {
	var d Detection
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || v == "" {
			continue
		}
		switch k {
		case "smi":
			if strings.HasPrefix(v, "GPU ") {
				d.SMI = append(d.SMI, v)
			}
		case "dev":
			d.DevNodes = append(d.DevNodes, v)
		case "pci":
			d.PCI = append(d.PCI, v)
		}
	}
	return d
}

// Count is the number of GPUs detected, from the most trustworthy source
// that saw any: nvidia-smi, else PCI, else device nodes.
func (d Detection) Count() int {
	n, _ := d.counted()
	return n
}

// Source names where Count comes from.
func (d Detection) Source() string {
	_, s := d.counted()
	return s
}

func (d Detection) counted() (int, string) {
	switch {
	case len(d.SMI) > 0:
		return len(d.SMI), SourceNvidiaSMI
	case len(d.PCI) > 0:
		return len(d.PCI), SourcePCI
	case len(d.DevNodes) > 0:
		return len(d.DevNodes), SourceDevNodes
	}
	return 0, SourceNone
}

// Present reports whether the node has an NVIDIA GPU at all.
func (d Detection) Present() bool { return d.Count() > 0 }

// DriverAnswers reports whether the NVIDIA driver lists GPUs.
func (d Detection) DriverAnswers() bool { return len(d.SMI) > 0 }
