package gpu

import (
	"encoding/json"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/homelab-dev/homelab/inventory"
)

// NVIDIA's device plugin: a DaemonSet on the GPU nodes that advertises
// nvidia.com/gpu to the kubelet, so pods can request GPUs. Shaped after
// NVIDIA's static deployment (deployments/static/nvidia-device-plugin.yml)
// and bound to the GPU nodes: their label, their taints, the nvidia
// runtime (which injects the driver's NVML library the plugin needs).
const (
	// DevicePluginPath is where the DaemonSet lands in a render (cluster-wide).
	DevicePluginPath      = "nvidia-device-plugin.yaml"
	DevicePluginName      = "nvidia-device-plugin-daemonset"
	DevicePluginNamespace = "kube-system"
	DevicePluginImage     = "nvcr.io/nvidia/k8s-device-plugin"
	devicePluginPodLabel  = "nvidia-device-plugin-ds"
	devicePluginHostDir   = "/var/lib/kubelet/device-plugins"
)

// DevicePlugin renders the DaemonSet: image at version, on nodes labelled
// gpuLabel=true, tolerating every taint those nodes carry (the GPU taint,
// whatever value and effect the inventory gave it, and any other) and run
// with the nvidia RuntimeClass.
func DevicePlugin(version, gpuLabel string, gpuNodeTaints []inventory.Taint) ([]byte, error) {
	type keyEffect struct{ key, effect string }
	seen := map[keyEffect]bool{}
	var tolerations []corev1.Toleration
	for _, t := range gpuNodeTaints {
		ke := keyEffect{t.Key, t.Effect}
		if seen[ke] {
			continue
		}
		seen[ke] = true
		tolerations = append(tolerations, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffect(t.Effect)})
	}
	sort.Slice(tolerations, func(i, j int) bool {
		a, b := tolerations[i], tolerations[j]
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		return a.Effect < b.Effect
	})
	runtimeClass := RuntimeClassName
	no := false
	labels := map[string]string{"name": devicePluginPodLabel}
	ds := appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: DevicePluginName, Namespace: DevicePluginNamespace, Labels: map[string]string{"app.kubernetes.io/managed-by": "homelab"}},
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: labels},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:      map[string]string{gpuLabel: "true"},
					Tolerations:       tolerations,
					RuntimeClassName:  &runtimeClass,
					PriorityClassName: "system-node-critical",
					Containers: []corev1.Container{{
						Name:  "nvidia-device-plugin-ctr",
						Image: DevicePluginImage + ":" + version,
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: &no,
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "device-plugin", MountPath: devicePluginHostDir}},
					}},
					Volumes: []corev1.Volume{{Name: "device-plugin", VolumeSource: corev1.VolumeSource{
						HostPath: &corev1.HostPathVolumeSource{Path: devicePluginHostDir, Type: ptr(corev1.HostPathDirectory)},
					}}},
				},
			},
		},
	}
	return marshalObject(ds)
}

func ptr[T any](v T) *T { return &v }

// marshalObject writes a typed object as YAML without what only the API
// server fills in (status, creationTimestamp: null).
func marshalObject(obj any) ([]byte, error) {
	j, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	prune(m)
	return yaml.Marshal(m)
}

// prune drops creationTimestamp: null and empty mappings (resources: {})
// left by zero-valued structs.
func prune(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if c == nil || prune(c) {
				delete(x, k)
			}
		}
		return len(x) == 0
	case []any:
		for _, c := range x {
			prune(c)
		}
	}
	return false
}
