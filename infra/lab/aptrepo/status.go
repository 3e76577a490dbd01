package aptrepo

import (
	"bytes"
	"slices"
)

// Names are the packages a fresh node has none of and the lab's
// repository provides.
var Names = []string{"kubeadm", "kubelet", "kubectl", "cri-tools", "kubernetes-cni"}

// Forget returns a dpkg status database without the named packages'
// paragraphs. A lab node starts from this machine's own database, which
// may hold one of them (Google Cloud SDK's kubectl, at epoch 1, would
// outrank every Kubernetes version): forgotten, the node is as fresh as a
// real one, whose binaries the lab's tools layer provides anyway.
func Forget(status []byte, names ...string) []byte {
	var out bytes.Buffer
	for _, para := range bytes.SplitAfter(status, []byte("\n\n")) {
		if name, ok := packageOf(para); ok && slices.Contains(names, name) {
			continue
		}
		out.Write(para)
	}
	return out.Bytes()
}

func packageOf(para []byte) (string, bool) {
	for _, line := range bytes.Split(para, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("Package: ")); ok {
			return string(bytes.TrimSpace(v)), true
		}
	}
	return "", false
}
