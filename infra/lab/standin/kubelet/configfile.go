package kubelet

import (
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// kubeletConfiguration is the part of kubelet.config.k8s.io/v1beta1
// KubeletConfiguration (what kubeadm writes to /var/lib/kubelet/config.yaml)
// that the stand-in honours.
type kubeletConfiguration struct {
	Kind               string `json:"kind"`
	APIVersion         string `json:"apiVersion"`
	StaticPodPath      string `json:"staticPodPath"`
	HealthzBindAddress string `json:"healthzBindAddress"`
	HealthzPort        *int32 `json:"healthzPort"`
	RotateCertificates bool   `json:"rotateCertificates"`
	ServerTLSBootstrap bool   `json:"serverTLSBootstrap"`
	Address            string `json:"address"`
	Port               int32  `json:"port"`
	Authentication     struct {
		X509 struct {
			ClientCAFile string `json:"clientCAFile"`
		} `json:"x509"`
	} `json:"authentication"`
	ContainerRuntimeEndpoint  string          `json:"containerRuntimeEndpoint"`
	NodeStatusUpdateFrequency metav1.Duration `json:"nodeStatusUpdateFrequency"`
	NodeLeaseDurationSeconds  int32           `json:"nodeLeaseDurationSeconds"`
	MaxPods                   int32           `json:"maxPods"`
	RegisterWithTaints        []corev1.Taint  `json:"registerWithTaints"`
	// FailCgroupV1 unset is the version's default (checkCgroupV1).
	FailCgroupV1 *bool `json:"failCgroupV1"`
}

func loadConfigFile(path string) (kubeletConfiguration, error) {
	var kc kubeletConfiguration
	b, err := os.ReadFile(path)
	if err != nil {
		return kc, fmt.Errorf("failed to load kubelet config file %s: %w", path, err)
	}
	if err := yaml.Unmarshal(b, &kc); err != nil {
		return kc, fmt.Errorf("failed to load kubelet config file %s: %w", path, err)
	}
	if kc.Kind != "" && kc.Kind != "KubeletConfiguration" {
		return kc, fmt.Errorf("kubelet config file %s: kind %q is not KubeletConfiguration", path, kc.Kind)
	}
	// Relative paths in the file are relative to the file, as for the
	// kubelet.
	if kc.StaticPodPath != "" && !filepath.IsAbs(kc.StaticPodPath) {
		kc.StaticPodPath = filepath.Join(filepath.Dir(path), kc.StaticPodPath)
	}
	return kc, nil
}
