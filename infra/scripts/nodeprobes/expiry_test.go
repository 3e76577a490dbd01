package nodeprobes

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// The expiry probe, run with sh and bash on a kubeadm-like tree, alone
// and in the live probe, lists every leaf certificate, the kubelet's
// client certificate and each kubeconfig's embedded one with its
// NotAfter, and prints no key.
func TestExpiryScript(t *testing.T) {
	root := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	keyDER, _ := x509.MarshalECPrivateKey(key)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	cert := func(cn string, notAfter time.Time) []byte {
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now(), NotAfter: notAfter}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	write := func(p string, data []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(root+p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(root+p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	soon := time.Now().Add(48 * time.Hour).Truncate(time.Second)
	write(nodefacts.PKIFile("apiserver.crt"), cert("kube-apiserver", soon))
	write(nodefacts.PKIFile("etcd/peer.crt"), cert("cp-1", soon.Add(time.Hour)))
	write(nodefacts.KubeletClientCert, append(cert("system:node:cp-1", soon.Add(2*time.Hour)), keyPEM...))
	write(nodefacts.AdminConf, []byte("apiVersion: v1\nusers:\n- name: admin\n  user:\n    client-certificate-data: "+
		base64.StdEncoding.EncodeToString(cert("kubernetes-admin", soon.Add(3*time.Hour)))+"\n    client-key-data: "+base64.StdEncoding.EncodeToString(keyPEM)+"\n"))
	for _, shell := range shells {
		checkExpiry(t, run(t, shell, ExpiryAt(root).Script()), keyPEM, soon)
		checkExpiry(t, run(t, shell, LiveAt(root).Script()), keyPEM, soon)
	}
}

func checkExpiry(t *testing.T, out string, keyPEM []byte, soon time.Time) {
	t.Helper()
	if strings.Contains(out, base64.StdEncoding.EncodeToString(keyPEM)) || strings.Contains(out, "PRIVATE KEY") {
		t.Error("the probe printed a key")
	}
	got := map[string]nodefacts.Expiry{}
	for _, e := range nodefacts.ParseExpiry(out) {
		got[e.Path] = e
	}
	for p, want := range map[string]struct {
		cn    string
		after time.Time
	}{
		nodefacts.PKIFile("apiserver.crt"): {"kube-apiserver", soon},
		nodefacts.PKIFile("etcd/peer.crt"): {"cp-1", soon.Add(time.Hour)},
		nodefacts.KubeletClientCert:        {"system:node:cp-1", soon.Add(2 * time.Hour)},
		nodefacts.AdminConf:                {"kubernetes-admin", soon.Add(3 * time.Hour)},
	} {
		e, ok := got[p]
		if !ok || e.Subject != want.cn || !e.NotAfter.Equal(want.after) {
			t.Errorf("%s: %+v, want %s until %s", p, e, want.cn, want.after)
		}
	}
	if len(got) != 4 {
		t.Errorf("%d certificates listed, want 4: %v", len(got), got)
	}
}
