package doctor

import (
	"fmt"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/gpu"
)

// gpuVerdict is one node's GPU row, as data: what the inventory declares
// against what the node shows.
type gpuVerdict struct {
	// row is false when there is nothing to say: no GPU declared, none found.
	row      bool
	status   Status
	declared int
	detected int
	// source is where detected comes from (gpu.SourceNvidiaSMI, ...).
	source string
	// noDriver: the cards are there but nvidia-smi lists none.
	noDriver bool
}

// judgeGPUs compares declared and detected NVIDIA GPUs. A difference is a
// warning, not a failure: the cluster runs either way, only GPU pods land
// where there is no GPU (or GPUs sit unused).
func judgeGPUs(n inventory.Node, d gpu.Detection) gpuVerdict {
	v := gpuVerdict{detected: d.Count(), source: d.Source()}
	if n.HasGPUs() {
		v.declared = n.GPUs.Count
	}
	switch {
	case v.declared == 0 && v.detected == 0:
		return v
	case v.declared != v.detected:
		v.status = Warn
	case !d.DriverAnswers():
		v.status, v.noDriver = Warn, true
	default:
		v.status = OK
	}
	v.row = true
	return v
}

func (v gpuVerdict) detail(field string) string {
	switch {
	case v.status == OK:
		return fmt.Sprintf("%d NVIDIA GPU(s) as declared (%s)", v.detected, v.source)
	case v.noDriver:
		return fmt.Sprintf("%d NVIDIA GPU(s) as declared, but only seen on %s: nvidia-smi lists none, so pods cannot use them; install or load the NVIDIA driver", v.detected, v.source)
	case v.declared == 0:
		return fmt.Sprintf("declares no GPU, %d NVIDIA GPU(s) detected (%s): declare them in %s (vendor: nvidia, count: %d) to give the node the GPU role", v.detected, v.source, field, v.detected)
	case v.detected == 0:
		return fmt.Sprintf("declares %d NVIDIA GPU(s), none detected (no nvidia-smi GPU, no /dev/nvidia0, no NVIDIA display device on PCI): check the node (card seated? driver loaded?) or fix %s in the inventory", v.declared, field)
	}
	return fmt.Sprintf("declares %d NVIDIA GPU(s), %d detected (%s): check the node or fix %s.count in the inventory", v.declared, v.detected, v.source, field)
}

// checkGPUs adds the node's GPU row, if it has anything to say.
func (d *doctor) checkGPUs(n inventory.Node, f *nodeFacts) {
	if !f.gpusRead {
		return
	}
	v := judgeGPUs(n, f.gpus)
	if !v.row {
		return
	}
	field := "nodes[].gpus"
	for i, m := range d.t.Inventory.Nodes {
		if m.Name == n.Name {
			field = fmt.Sprintf("nodes[%d].gpus", i)
		}
	}
	d.r.add("gpu", n.Name, v.status, "%s", v.detail(field))
}
