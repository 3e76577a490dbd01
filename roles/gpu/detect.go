package gpu

import "strings"

// DetectScript is a read-only command that lists what a node shows of
// NVIDIA GPUs, one key=value line each: the GPUs nvidia-smi -L lists (the
// driver answers), the /dev/nvidiaN device nodes (the driver is loaded),
// and the NVIDIA display controllers on PCI (vendor 0x10de, class 0x03xxxx:
// the card is there, driver or not). Both the provider (whether to install
// the toolkit) and doctor (declared vs detected) run it. The shell reads
// each device's files itself: a command substitution per file forked a
// shell and a cat for every PCI device on every read.
var DetectScript = detectScript("/sys/bus/pci/devices")

// detectScript is DetectScript listing the PCI devices under pci (a
// test's tree).
func detectScript(pci string) string {
	return `command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | sed 's/^/smi=/'
for d in /dev/nvidia[0-9]*; do [ -e "$d" ] && echo "dev=$d"; done
for d in ` + pci + `/*; do
  [ -r "$d/vendor" ] || continue
  v=; read -r v 2>/dev/null < "$d/vendor"; [ "$v" = 0x10de ] || continue
  c=; read -r c 2>/dev/null < "$d/class"
  case "$c" in 0x03*) echo "pci=${d##*/} $c";; esac
done
true`
}

// Detection is what DetectScript found on a node.
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

// ParseDetection reads DetectScript's output. Lines it does not know are
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
