package provider

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/roles/nodefacts"
	"github.com/homelab-dev/homelab/roles/pki"
)

// TestFactsScriptReadsCertificates runs the facts script in real shells
// over real files: the CA and the kubelet's client certificate come back
// whole (the CA pins as the file does), the kubelet's key never leaves
// the node, and a missing file is no line at all.
func TestFactsScriptReadsCertificates(t *testing.T) {
	dir := t.TempDir()
	kca := newKubeletCA(t)
	ca := kca.PEM
	kubelet, key := kca.pair("gpu-1", time.Now().Add(time.Hour))
	caPath, kubeletPath := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "kubelet-client-current.pem")
	if err := os.WriteFile(caPath, ca, 0o644); err != nil {
		t.Fatal(err)
	}
	// As the kubelet writes it: the certificate, then its key.
	if err := os.WriteFile(kubeletPath, append(append([]byte{}, kubelet...), key...), 0o600); err != nil {
		t.Fatal(err)
	}
	wantPin, err := pki.CAPin(ca)
	if err != nil {
		t.Fatal(err)
	}
	for _, shell := range []string{"sh", "bash"} {
		run := func(script string) (HostState, map[string][]byte, string) {
			t.Helper()
			out, err := exec.Command(shell, "-c", script).Output()
			if err != nil {
				t.Fatalf("%s: %v\n%s", shell, err, out)
			}
			st := HostState{Versions: map[string]string{}, Stamps: map[string]string{}}
			st.parseFacts(string(out))
			certs := map[string][]byte{}
			for _, k := range []string{"ca", "kubeletcert", "kubeletconf"} {
				certs[k] = nodefacts.Lines(string(out), k)
			}
			return st, certs, string(out)
		}
		st, certs, out := run(factsAt(caPath, kubeletPath, filepath.Join(dir, "kubelet.conf")).Script().String())
		host, _ := os.Hostname()
		if st.Hostname != host || st.Kernel == "" {
			t.Errorf("%s: hostname %q kernel %q", shell, st.Hostname, st.Kernel)
		}
		if pin, err := pki.CAPin(certs["ca"]); err != nil || pin != wantPin {
			t.Errorf("%s: the CA read back pins %q (%v), want %q", shell, pin, err, wantPin)
		}
		if name := pki.NodeNameOf(certs["kubeletcert"]); name != "gpu-1" {
			t.Errorf("%s: the kubelet's certificate names %q", shell, name)
		}
		if strings.Contains(out, "PRIVATE KEY") {
			t.Errorf("%s: the kubelet's key left the node:\n%s", shell, out)
		}
		if certs["kubeletconf"] != nil {
			t.Errorf("%s: a missing kubelet.conf was reported", shell)
		}

		_, certs, _ = run(factsAt(filepath.Join(dir, "none.crt"), filepath.Join(dir, "none.pem"), caPath).Script().String())
		if certs["ca"] != nil || certs["kubeletcert"] != nil || certs["kubeletconf"] == nil {
			t.Errorf("%s: missing files gave %v", shell, certs)
		}
	}
}
