// Package gpu renders what a GPU worker gets beyond a plain worker: the
// NVIDIA runtime for containerd and the cluster's RuntimeClass. Labels and
// taints come from the kubeadm renderer (registration) and the provisioner.
package gpu

import (
	"github.com/homelab-dev/homelab/inventory"
	"sigs.k8s.io/yaml"
)

// ContainerdDropInPath is where nvidia-ctk puts its drop-in: containerd 2
// imports /etc/containerd/conf.d/*.toml, so re-applying the main config
// never wipes the GPU runtime (Kubespray #12277).
const ContainerdDropInPath = "/etc/containerd/conf.d/99-nvidia.toml"

// ContainerdUnit is the runtime's unit, which reads drop-ins when it starts.
const ContainerdUnit = "containerd"

// RuntimeClassPath is where the RuntimeClass lands in a render (cluster-wide).
const RuntimeClassPath = "runtimeclass-nvidia.yaml"

// RuntimeClassName is what GPU pods set in runtimeClassName.
const RuntimeClassName = "nvidia"

// RuntimeBinary is the NVIDIA runtime GPU pods run with, from the
// nvidia-container-toolkit package.
const RuntimeBinary = "/usr/bin/nvidia-container-runtime"

const containerdDropIn = `# Rendered by homelab: the NVIDIA container runtime for GPU pods
# (runtimeClassName: nvidia). Needs the nvidia-container-toolkit package.
version = 3

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]
  BinaryName = "/usr/bin/nvidia-container-runtime"
  SystemdCgroup = true
`

// ContainerdDropIn returns the drop-in for an NVIDIA GPU node.
func ContainerdDropIn(node inventory.Node) ([]byte, bool) {
	if !IsNvidia(node) {
		return nil, false
	}
	return []byte(containerdDropIn), true
}

// IsNvidia says node declares NVIDIA GPUs: it runs GPU pods with
// RuntimeBinary, under the runtime handler RuntimeClassName.
func IsNvidia(node inventory.Node) bool {
	return node.HasGPUs() && node.GPUs.Vendor == "nvidia"
}

type runtimeClass struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   map[string]string `json:"metadata"`
	Handler    string            `json:"handler"`
	Scheduling scheduling        `json:"scheduling"`
}

type scheduling struct {
	NodeSelector map[string]string `json:"nodeSelector"`
	Tolerations  []toleration      `json:"tolerations"`
}

type toleration struct {
	Key      string `json:"key"`
	Operator string `json:"operator"`
	Effect   string `json:"effect"`
}

// RuntimeClass renders the nvidia RuntimeClass: pods that ask for it land on
// GPU nodes and tolerate their taint without repeating either.
func RuntimeClass(gpuLabel, gpuTaintKey string) ([]byte, error) {
	return yaml.Marshal(runtimeClass{
		APIVersion: "node.k8s.io/v1",
		Kind:       "RuntimeClass",
		Metadata:   map[string]string{"name": RuntimeClassName},
		Handler:    RuntimeClassName,
		Scheduling: scheduling{
			NodeSelector: map[string]string{gpuLabel: "true"},
			Tolerations:  []toleration{{Key: gpuTaintKey, Operator: "Exists", Effect: "NoSchedule"}},
		},
	})
}
