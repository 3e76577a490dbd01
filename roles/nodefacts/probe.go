package nodefacts

import (
	"crypto/x509"
	"strings"
)

// ProbeScript is read-only. It prints what a control-plane node's own
// configuration says, for ParseProbe: the static pod manifests,
// kubeadm-flags.env and the serving certificates, whole ("file=PATH
// BASE64", one line each, those that exist), and the server of every
// kubeconfig in KubernetesDir ("kubeconfig=PATH URL"). No key and no
// kubeconfig's credentials leave the node. On a worker it prints the
// kubelet's flags and kubeconfig only.
var ProbeScript = probeScript("")

// probedFiles are the files ProbeScript prints whole.
func probedFiles() []string {
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

// probeScript reads below root (a test's file tree); "" is the node's /.
// Each file is "file=PATH", then its lines (LinesFuncs): no process per
// file, and process creation is most of what a refresh costs
// (docs/benchmarks.md). Every kubeconfig gets a line without a server
// first; awk's, when it names one, comes later and wins.
func probeScript(root string) string {
	return "r=" + rootWord(root) + "\n" +
		LinesFuncs + "\n" +
		"for f in " + strings.Join(probedFiles(), " ") + `; do [ -f "$r$f" ] && { printf 'file=%s \n' "$f"; lines "line $f" "$r$f"; }; done` + "\n" +
		"set --\n" +
		`for p in "$r"` + KubernetesDir + `/*.conf; do [ -f "$p" ] && { echo "kubeconfig=${p#"$r"} "; set -- "$@" "$p"; }; done` + "\n" +
		`[ $# -eq 0 ] || awk -v n=${#r} 'FNR == 1 { got = 0 } !got && $1 == "server:" { print "kubeconfig=" substr(FILENAME, n + 1) " " $2; got = 1 }' "$@"` + "\n" +
		"true"
}

// Live is what ProbeScript found on a node.
type Live struct {
	// Files are the probed files that exist, by path.
	Files map[string][]byte
	// Kubeconfigs are each kubeconfig's server URL, by path ("" when it
	// names none).
	Kubeconfigs map[string]string
}

// ParseProbe reads ProbeScript's output. Lines it does not know are
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
	data, ok := l.Files[Manifest(component)]
	if !ok {
		return nil, false
	}
	flags, err := ManifestFlags(data)
	return flags, err == nil
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
