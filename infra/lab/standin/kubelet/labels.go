package kubelet

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The label keys and namespaces a kubelet may set on its own Node; the
// NodeRestriction admission plugin refuses others in the kubernetes.io and
// k8s.io namespaces, so the kubelet refuses to start with them.
var (
	kubeletLabels = map[string]bool{
		corev1.LabelHostname: true, corev1.LabelTopologyZone: true, corev1.LabelTopologyRegion: true,
		corev1.LabelFailureDomainBetaZone: true, corev1.LabelFailureDomainBetaRegion: true,
		corev1.LabelInstanceType: true, corev1.LabelInstanceTypeStable: true,
		corev1.LabelOSStable: true, corev1.LabelArchStable: true,
		"beta.kubernetes.io/os": true, "beta.kubernetes.io/arch": true,
	}
	kubeletLabelNamespaces = []string{corev1.LabelNamespaceSuffixKubelet, corev1.LabelNamespaceSuffixNode}
)

// validateNodeLabels mirrors the kubelet's check of --node-labels.
func validateNodeLabels(labels map[string]string) error {
	var unknown, invalid []string
	for k, v := range labels {
		if isKubernetesLabel(k) && !isKubeletLabel(k) {
			unknown = append(unknown, k)
		}
		for _, e := range validation.IsQualifiedName(k) {
			invalid = append(invalid, fmt.Sprintf("%s: %s", k, e))
		}
		for _, e := range validation.IsValidLabelValue(v) {
			invalid = append(invalid, fmt.Sprintf("%s=%s: %s", k, v, e))
		}
	}
	sort.Strings(unknown)
	sort.Strings(invalid)
	if len(unknown) > 0 {
		return fmt.Errorf("unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: %v\n"+
			"--node-labels in the 'kubernetes.io' namespace must begin with an allowed prefix (%s) or be in the specifically allowed set",
			unknown, strings.Join(kubeletLabelNamespaces, ", "))
	}
	if len(invalid) > 0 {
		return fmt.Errorf("invalid node labels: %s", strings.Join(invalid, "; "))
	}
	return nil
}

func labelNamespace(key string) string {
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return ""
	}
	return ns
}

func isKubernetesLabel(key string) bool {
	ns := labelNamespace(key)
	for _, d := range []string{"kubernetes.io", "k8s.io"} {
		if ns == d || strings.HasSuffix(ns, "."+d) {
			return true
		}
	}
	return false
}

func isKubeletLabel(key string) bool {
	if kubeletLabels[key] {
		return true
	}
	ns := labelNamespace(key)
	for _, allowed := range kubeletLabelNamespaces {
		if ns == allowed || strings.HasSuffix(ns, "."+allowed) {
			return true
		}
	}
	return false
}

// parseTaints reads --register-with-taints: key=value:Effect or key:Effect,
// comma separated.
func parseTaints(s string) ([]corev1.Taint, error) {
	var out []corev1.Taint
	for _, spec := range strings.Split(s, ",") {
		spec = strings.TrimSpace(spec)
		if spec == "" {
			continue
		}
		kv, effect, ok := strings.Cut(spec, ":")
		if !ok {
			return nil, fmt.Errorf("taint %q: missing effect", spec)
		}
		switch corev1.TaintEffect(effect) {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return nil, fmt.Errorf("taint %q: invalid effect %q", spec, effect)
		}
		key, value, _ := strings.Cut(kv, "=")
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return nil, fmt.Errorf("taint %q: %s", spec, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
			return nil, fmt.Errorf("taint %q: %s", spec, strings.Join(errs, "; "))
		}
		out = append(out, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)})
	}
	return out, nil
}
