package clientcert

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/keyutil"
)

func selfSigned(t *testing.T, notAfter time.Time) (certPEM, keyPEM []byte) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "system:node:n"},
		NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ = keyutil.MarshalPrivateKeyToPEM(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM
}

func writeKC(t *testing.T, path string, auth *clientcmdapi.AuthInfo) {
	kc := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"c": {Server: "https://127.0.0.1:1"}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": auth},
		Contexts:       map[string]*clientcmdapi.Context{"x": {Cluster: "c", AuthInfo: "u"}},
		CurrentContext: "x",
	}
	if err := clientcmd.WriteToFile(kc, path); err != nil {
		t.Fatal(err)
	}
}

func TestLoadValid(t *testing.T) {
	d := t.TempDir()
	good, bad := filepath.Join(d, "good.conf"), filepath.Join(d, "expired.conf")
	c, k := selfSigned(t, time.Now().Add(time.Hour))
	writeKC(t, good, &clientcmdapi.AuthInfo{ClientCertificateData: c, ClientKeyData: k})
	c, k = selfSigned(t, time.Now().Add(-time.Hour))
	writeKC(t, bad, &clientcmdapi.AuthInfo{ClientCertificateData: c, ClientKeyData: k})
	if _, err := loadValid(good); err != nil {
		t.Errorf("valid kubeconfig: %v", err)
	}
	if _, err := loadValid(bad); err == nil {
		t.Error("expired certificate accepted")
	}
	if _, err := loadValid(filepath.Join(d, "missing.conf")); err == nil {
		t.Error("missing file accepted")
	}
}

// A certificate obtained by an earlier run that died before writing the
// kubeconfig is reused without asking the API again.
func TestBootstrapReusesStoredCertificate(t *testing.T) {
	d := t.TempDir()
	pki := filepath.Join(d, "pki")
	if err := os.MkdirAll(pki, 0o755); err != nil {
		t.Fatal(err)
	}
	c, k := selfSigned(t, time.Now().Add(time.Hour))
	pair := filepath.Join(pki, "kubelet-client-2026-01-01-00-00-00.pem")
	if err := os.WriteFile(pair, append(c, k...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(pair, filepath.Join(pki, "kubelet-client-current.pem")); err != nil {
		t.Fatal(err)
	}
	boot := filepath.Join(d, "bootstrap-kubelet.conf")
	writeKC(t, boot, &clientcmdapi.AuthInfo{Token: "abcdef.0123456789abcdef"})
	kubeconfig := filepath.Join(d, "kubelet.conf")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cfg, err := Load(ctx, Options{NodeName: "n", KubeconfigPath: kubeconfig, BootstrapKubeconfigPath: boot, CertDir: pki, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	current := filepath.Join(pki, "kubelet-client-current.pem")
	if cfg.CertFile != current || cfg.KeyFile != current || cfg.Host != "https://127.0.0.1:1" {
		t.Errorf("config %+v", rest.AnonymousClientConfig(cfg))
	}
}

// Load finds the credentials where the kubelet does: embedded in the
// kubeconfig or in the files it names. A kubeconfig it cannot use, with no
// bootstrap kubeconfig to get another, ends it at once, as it ends the
// kubelet at start: a kubelet.conf pointed at a missing file must not look
// like a working kubelet.
func TestLoadFollowsTheKubeconfig(t *testing.T) {
	d := t.TempDir()
	c, k := selfSigned(t, time.Now().Add(time.Hour))
	pair := filepath.Join(d, "kubelet-client-current.pem")
	if err := os.WriteFile(pair, append(c, k...), 0o600); err != nil {
		t.Fatal(err)
	}
	old, oldKey := selfSigned(t, time.Now().Add(-time.Hour))
	missing := filepath.Join(d, "pki", "kubelet-client-current.pem")
	absent := filepath.Join(d, "bootstrap-kubelet.conf") // as after a join: kubeadm removed it
	for _, tc := range []struct {
		name      string
		auth      *clientcmdapi.AuthInfo
		bootstrap string
		file      string // the config's CertFile; "" for embedded data
		fails     string // a word of the error; "" when it loads
	}{
		{"embedded", &clientcmdapi.AuthInfo{ClientCertificateData: c, ClientKeyData: k}, absent, "", ""},
		{"the rotating file", &clientcmdapi.AuthInfo{ClientCertificate: pair, ClientKey: pair}, absent, pair, ""},
		{"a missing file", &clientcmdapi.AuthInfo{ClientCertificate: missing, ClientKey: missing}, absent, "", "bootstrap-kubelet.conf"},
		{"an expired certificate", &clientcmdapi.AuthInfo{ClientCertificateData: old, ClientKeyData: oldKey}, absent, "", "expired"},
		{"an expired certificate, no bootstrap kubeconfig given", &clientcmdapi.AuthInfo{ClientCertificateData: old, ClientKeyData: oldKey}, "", "", ""},
		{"a missing file, no bootstrap kubeconfig given", &clientcmdapi.AuthInfo{ClientCertificate: missing, ClientKey: missing}, "", "", "kubelet-client-current.pem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kubeconfig := filepath.Join(t.TempDir(), "kubelet.conf")
			writeKC(t, kubeconfig, tc.auth)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			cfg, err := Load(ctx, Options{NodeName: "n", KubeconfigPath: kubeconfig, BootstrapKubeconfigPath: tc.bootstrap, CertDir: filepath.Join(d, "pki"),
				RetryInterval: 10 * time.Millisecond, Logf: t.Logf})
			if tc.fails != "" {
				if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), tc.fails) {
					t.Errorf("Load: %v (context %v), want an error naming %q at once", err, ctx.Err(), tc.fails)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.CertFile != tc.file || (tc.file == "") != (len(cfg.CertData) > 0) {
				t.Errorf("config: file %q, %d bytes of data", cfg.CertFile, len(cfg.CertData))
			}
		})
	}
}
