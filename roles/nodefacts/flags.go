package nodefacts

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// ParsePod reads a static pod manifest (YAML or JSON).
func ParsePod(manifest []byte) (*corev1.Pod, error) {
	var pod corev1.Pod
	if err := yaml.Unmarshal(manifest, &pod); err != nil {
		return nil, err
	}
	if len(pod.Spec.Containers) == 0 {
		return nil, fmt.Errorf("pod %q has no containers", pod.Name)
	}
	return &pod, nil
}

// Component is the container that runs the component: kubeadm writes one
// per static pod, and a hand-built pod puts its sidecars after it.
func Component(pod *corev1.Pod) *corev1.Container {
	if len(pod.Spec.Containers) == 0 {
		return nil
	}
	return &pod.Spec.Containers[0]
}

// PodFlags are the component's flags: the kubelet runs command then args as
// one argv, so a manifest may carry its flags in either (kubeadm uses
// command; others, and kubeadm's own patches, use args).
func PodFlags(pod *corev1.Pod) map[string]string {
	c := Component(pod)
	if c == nil {
		return map[string]string{}
	}
	return ParseFlags(append(append([]string{}, c.Command...), c.Args...))
}

// ManifestFlags parses a static pod manifest and returns PodFlags.
func ManifestFlags(manifest []byte) (map[string]string, error) {
	pod, err := ParsePod(manifest)
	if err != nil {
		return nil, err
	}
	return PodFlags(pod), nil
}

// ParseFlags reads an argv's long flags as pflag does: --name=value, or
// --name value when the next word is no flag; a flag given twice keeps its
// last value, a lone --name is "true", and "--" ends the flags. Words that
// are neither (the binary's name) are skipped. Which flags are boolean is
// not known here, so a boolean flag followed by a bare word takes that
// word: the control-plane components take no positional arguments.
func ParseFlags(argv []string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if a == "--" {
			break
		}
		name, ok := strings.CutPrefix(a, "--")
		if !ok || name == "" || strings.HasPrefix(name, "-") {
			continue
		}
		if k, v, ok := strings.Cut(name, "="); ok {
			out[k] = v
			continue
		}
		if i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "-") {
			out[name] = argv[i+1]
			i++
			continue
		}
		out[name] = "true"
	}
	return out
}

// KubeletFlags reads KubeletFlagsEnv (KUBELET_KUBEADM_ARGS="--node-ip=...").
func KubeletFlags(env []byte) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(string(env), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || strings.TrimSpace(k) != "KUBELET_KUBEADM_ARGS" {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		for k, fv := range ParseFlags(strings.Fields(v)) {
			out[k] = fv
		}
	}
	return out
}
