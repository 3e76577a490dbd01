package nodeprobes

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/roles/nodefacts"
	"github.com/homelab-dev/homelab/roles/pki/pkitest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

// testCA issues kubelet client certificates as the cluster's signer does.
type testCA struct {
	*pkitest.CA
	t testing.TB
}

func newTestCA(t *testing.T, cn string) *testCA { return &testCA{pkitest.NewCA(t, cn), t} }

// client issues a certificate for cn in org, valid from notBefore to
// notAfter, and returns it with its key (PEM).
func (ca *testCA) client(cn, org string, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	return ca.Issue(ca.t, pkitest.Leaf{CN: cn, Orgs: []string{org}, NotBefore: notBefore, NotAfter: notAfter,
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

// kubeletConf is a kubelet.conf as kubeadm writes it, with auth as its user.
func kubeletConf(t *testing.T, caPEM []byte, auth *clientcmdapi.AuthInfo) []byte {
	kc := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"kubernetes": {Server: "https://10.0.0.11:6443", CertificateAuthorityData: caPEM}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"system:node:cp-1": auth},
		Contexts:       map[string]*clientcmdapi.Context{"system:node:cp-1@kubernetes": {Cluster: "kubernetes", AuthInfo: "system:node:cp-1"}},
		CurrentContext: "system:node:cp-1@kubernetes",
	}
	data, err := clientcmd.Write(kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The probe, run with sh on a node's tree, shows what kubelet.conf's user
// authenticates with (in YAML as kubeadm writes it, or JSON) and the
// rotating file's certificate, and prints no key.
func TestKubeletClientScript(t *testing.T) {
	ca := newTestCA(t, "kubernetes")
	now := time.Now()
	embedded, key := ca.client("system:node:cp-1", "system:nodes", now.Add(-time.Hour), now.Add(24*time.Hour))
	rotated, rotatedKey := ca.client("system:node:cp-1", "system:nodes", now.Add(-time.Hour), now.Add(48*time.Hour))
	embeddedConf := kubeletConf(t, ca.PEM, &clientcmdapi.AuthInfo{ClientCertificateData: embedded, ClientKeyData: key})
	var asJSON map[string]any
	if err := yaml.Unmarshal(embeddedConf, &asJSON); err != nil {
		t.Fatal(err)
	}
	jsonConf, _ := json.MarshalIndent(asJSON, "", "  ")

	for _, tc := range []struct {
		name    string
		conf    []byte
		current bool
		ca      bool
		check   func(t *testing.T, k nodefacts.KubeletClient)
	}{
		{"embedded (YAML)", embeddedConf, true, true, func(t *testing.T, k nodefacts.KubeletClient) {
			if !k.Embeds() || !k.EmbeddedKey || k.CertFile != "" || k.User != "system:node:cp-1" {
				t.Errorf("read %+v", k)
			}
			if !k.Embedded.NotAfter.Equal(now.Add(24*time.Hour).Truncate(time.Second)) || k.Current == nil || !k.Current.NotAfter.Equal(now.Add(48*time.Hour).Truncate(time.Second)) {
				t.Errorf("embedded until %v, current %+v", k.Embedded.NotAfter, k.Current)
			}
			if p := nodefacts.KubeletCertProblem(k.Embedded, "cp-1", k.CAs, now); p != "" {
				t.Errorf("embedded certificate: %s", p)
			}
		}},
		{"embedded (JSON), no ca.crt: kubelet.conf's cluster CA", jsonConf, false, false, func(t *testing.T, k nodefacts.KubeletClient) {
			if !k.Embeds() || !k.EmbeddedKey || k.Current != nil || k.Err != nil {
				t.Errorf("read %+v", k)
			}
			if p := nodefacts.KubeletCertProblem(k.Embedded, "cp-1", k.CAs, now); p != "" {
				t.Errorf("embedded certificate against kubelet.conf's CA: %s", p)
			}
		}},
		{"the rotating file", kubeletConf(t, ca.PEM, &clientcmdapi.AuthInfo{ClientCertificate: nodefacts.KubeletClientCert, ClientKey: nodefacts.KubeletClientCert}), true, true, func(t *testing.T, k nodefacts.KubeletClient) {
			if k.Embeds() || k.EmbeddedKey || k.CertFile != nodefacts.KubeletClientCert || k.KeyFile != nodefacts.KubeletClientCert || k.Err != nil {
				t.Errorf("read %+v", k)
			}
		}},
		{"a relative path", kubeletConf(t, ca.PEM, &clientcmdapi.AuthInfo{ClientCertificate: "pki/kubelet.crt", ClientKey: "pki/kubelet.key"}), false, true, func(t *testing.T, k nodefacts.KubeletClient) {
			if k.CertFile != nodefacts.PKIFile("kubelet.crt") || k.KeyFile != nodefacts.PKIFile("kubelet.key") {
				t.Errorf("read %+v", k)
			}
		}},
		{"no current context", []byte("apiVersion: v1\nkind: Config\nusers: []\n"), false, true, func(t *testing.T, k nodefacts.KubeletClient) {
			if !k.Conf || k.Err == nil || k.Embeds() {
				t.Errorf("read %+v", k)
			}
		}},
		{"no kubelet.conf", nil, true, true, func(t *testing.T, k nodefacts.KubeletClient) {
			if k.Conf || k.Err != nil || k.Current == nil {
				t.Errorf("read %+v", k)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			write := func(p string, data []byte) {
				t.Helper()
				if err := os.MkdirAll(filepath.Dir(root+p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(root+p, data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if tc.conf != nil {
				write(nodefacts.KubeletConf, tc.conf)
			}
			if tc.current {
				// As the kubelet's store keeps it: a link to the newest pair.
				pair := nodefacts.KubeletClientPair(now)
				write(pair, nodefacts.PairPEM(rotated, rotatedKey))
				if err := os.Symlink(root+pair, root+nodefacts.KubeletClientCert); err != nil {
					t.Fatal(err)
				}
			}
			if tc.ca {
				write(nodefacts.CACert, ca.PEM)
			}
			for _, shell := range shells {
				checkKubeletClientOut(t, run(t, shell, KubeletClientAt(root).Script()), [][]byte{key, rotatedKey}, tc.check)
			}
		})
	}
}

// checkKubeletClientOut fails on any of keys in the probe's output, raw or
// base64, then checks what it parses to.
func checkKubeletClientOut(t *testing.T, out string, keys [][]byte, check func(t *testing.T, k nodefacts.KubeletClient)) {
	t.Helper()
	{
		{
			decoded := out
			for _, l := range strings.Split(out, "\n") {
				if _, v, ok := strings.Cut(l, "="); ok {
					d, _ := base64.StdEncoding.DecodeString(v)
					decoded += string(d)
				}
			}
			for _, k := range keys {
				if strings.Contains(decoded, string(k)) || strings.Contains(decoded, base64.StdEncoding.EncodeToString(k)) || strings.Contains(decoded, "PRIVATE KEY") {
					t.Fatal("the probe printed a key")
				}
			}
			check(t, nodefacts.ParseKubeletClient(out))
		}
	}
}
