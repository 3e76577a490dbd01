package nodeprobes

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

func write(t *testing.T, root, p, content string) {
	t.Helper()
	full := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// certPEM is a self-signed certificate with those nodefacts.SANs.
func certPEM(t *testing.T, dns []string, ips ...net.IP) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "etcd"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), DNSNames: dns, IPAddresses: ips}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// The probe runs here as on a node, alone and in the live probe, over a kubeadm-like tree; what
// nodefacts.ParseProbe makes of it is what the files say.
func TestProbeScript(t *testing.T) {
	root := t.TempDir()
	write(t, root, nodefacts.Manifest(nodefacts.KubeAPIServer), `apiVersion: v1
kind: Pod
metadata: {name: kube-apiserver, namespace: kube-system}
spec:
  containers:
  - name: kube-apiserver
    command:
    - kube-apiserver
    - --advertise-address=10.0.0.11
    - --etcd-servers=https://127.0.0.1:2379
`)
	// etcd's flags in args, as a hand-built cluster may have them.
	write(t, root, nodefacts.Manifest(nodefacts.Etcd), `apiVersion: v1
kind: Pod
metadata: {name: etcd, namespace: kube-system}
spec:
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.6.5-0
    args:
    - --listen-peer-urls=https://10.0.0.11:2380
    - --name=cp-1
`)
	write(t, root, nodefacts.KubeletFlagsEnv, `KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.11 --pod-infra-container-image=registry.k8s.io/pause:3.10"`+"\n")
	write(t, root, nodefacts.PKIFile(nodefacts.EtcdPeerCert), string(certPEM(t, []string{"cp-1", "localhost"}, net.ParseIP("10.0.0.11"), net.ParseIP("127.0.0.1"), net.ParseIP("::1"))))
	const secret = "PRIVATE-KEY-MATERIAL"
	write(t, root, nodefacts.PKIFile("etcd/peer.key"), secret)
	write(t, root, nodefacts.KubeletConf, "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: QUJD\n    server: https://10.0.0.11:6443\n  name: default\nusers:\n- name: default\n  user:\n    client-key-data: "+secret+"\n")
	write(t, root, nodefacts.AdminConf, "clusters:\n- cluster:\n    server: https://10.0.0.100:6443\n")
	write(t, root, nodefacts.KubernetesDir+"/empty.conf", "")

	for _, shell := range shells {
		for _, s := range []scripts.Script{ProbeAt(root).Script(), LiveAt(root).Script()} {
			out := run(t, shell, s)
			if strings.Contains(out, secret) {
				t.Fatalf("%s: %s printed key material:\n%s", shell, s.Name(), out)
			}
			checkProbe(t, nodefacts.ParseProbe("Welcome to cp-1\nfile=relative x\n"+out))
		}
	}
}

func checkProbe(t *testing.T, l nodefacts.Live) {
	t.Helper()

	if f, ok := l.Flags(nodefacts.KubeAPIServer); !ok || f["advertise-address"] != "10.0.0.11" {
		t.Errorf("apiserver flags %v %v", f, ok)
	}
	if f, ok := l.Flags(nodefacts.Etcd); !ok || f["listen-peer-urls"] != "https://10.0.0.11:2380" {
		t.Errorf("etcd flags (args only) %v %v", f, ok)
	}
	if f, ok := l.Flags(nodefacts.KubeScheduler); ok {
		t.Errorf("a manifest that is not there has flags %v", f)
	}
	if got := l.KubeletFlags()["node-ip"]; got != "10.0.0.11" {
		t.Errorf("node IP %q", got)
	}
	c, ok := l.Cert(nodefacts.EtcdPeerCert)
	if !ok {
		t.Fatal("etcd/peer.crt not read")
	}
	if got := nodefacts.SANs(c); !slices.Equal(got, []string{"10.0.0.11", "127.0.0.1", "::1", "cp-1", "localhost"}) {
		t.Errorf("SANs %v", got)
	}
	if _, ok := l.Cert(nodefacts.APIServerCert); ok {
		t.Error("a certificate that is not there was read")
	}
	want := map[string]string{nodefacts.KubeletConf: "https://10.0.0.11:6443", nodefacts.AdminConf: "https://10.0.0.100:6443", nodefacts.KubernetesDir + "/empty.conf": ""}
	if !maps.Equal(l.Kubeconfigs, want) {
		t.Errorf("kubeconfig servers %v, want %v", l.Kubeconfigs, want)
	}
	if _, ok := l.Files["relative"]; ok {
		t.Error("a line naming no absolute path was taken")
	}
}

// On a blank machine (a worker, or a node not set up yet) the script
// succeeds and finds nothing.
func TestProbeScriptOnABlankNode(t *testing.T) {
	for _, shell := range shells {
		l := nodefacts.ParseProbe(run(t, shell, ProbeAt(t.TempDir()).Script()))
		if len(l.Files) != 0 || len(l.Kubeconfigs) != 0 {
			t.Errorf("%s: found %v %v", shell, l.Files, l.Kubeconfigs)
		}
	}
}
