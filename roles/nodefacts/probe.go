package nodefacts

import (
	"crypto/x509"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ProbedFiles are the files infra/scripts/nodefacts/probe.sh prints
// whole: the static pod manifests, kubeadm-flags.env and the serving
// certificates. On a worker only the kubelet's flags exist.
func ProbedFiles() []string {
	var out []string
	for _, c := range ControlPlaneComponents {
		out = append(out, Manifest(c))
	}
	out = append(out, KubeletFlagsEnv)
	for _, c := range ServingCerts {
		out = append(out, PKIFile(c.File))
	}
	return out
}

// Live is what infra/scripts/nodefacts/probe.sh found on a node.
type Live struct {
	// Files are the probed files that exist, by path.
	Files map[string][]byte
	// Kubeconfigs are each kubeconfig's server URL, by path ("" when it
	// names none).
	Kubeconfigs map[string]string
}

// ParseProbe reads what infra/scripts/nodefacts/probe.sh prints: each
// file ("file=PATH", then its lines) and each kubeconfig's server. Lines it does not know are
// ignored (a login banner).
func ParseProbe(out string) Live {
	l := Live{Files: map[string][]byte{}, Kubeconfigs: map[string]string{}}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		p, rest, _ := strings.Cut(v, " ")
		if !strings.HasPrefix(p, "/") {
			continue
		}
		switch k {
		case "file":
			l.Files[p] = append([]byte{}, Lines(out, "line "+p)...)
		case "kubeconfig":
			l.Kubeconfigs[p] = strings.TrimSpace(rest)
		}
	}
	return l
}

// Flags are the component's manifest's flags (PodFlags); false when the
// node has no manifest for it or it does not parse as a pod.
func (l Live) Flags(component string) (map[string]string, bool) {
	pod, ok := l.Pod(component)
	if !ok {
		return nil, false
	}
	return PodFlags(pod), true
}

// Pod is the component's static pod; false when the node has no
// manifest for it or it does not parse as a pod.
func (l Live) Pod(component string) (*corev1.Pod, bool) {
	data, ok := l.Files[Manifest(component)]
	if !ok {
		return nil, false
	}
	pod, err := ParsePod(data)
	return pod, err == nil
}

// KubeletFlags are kubeadm-flags.env's flags (none when it is absent).
func (l Live) KubeletFlags() map[string]string { return KubeletFlags(l.Files[KubeletFlagsEnv]) }

// Cert is a serving certificate (ServingCerts' File); false when absent
// or unreadable.
func (l Live) Cert(file string) (*x509.Certificate, bool) {
	data, ok := l.Files[PKIFile(file)]
	if !ok {
		return nil, false
	}
	c, err := ParseCertPEM(data)
	return c, err == nil
}
