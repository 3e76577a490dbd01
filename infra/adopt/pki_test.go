package adopt

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"io/fs"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/tools"
	"github.com/homelab-dev/homelab/roles/kubeadm"
	"github.com/homelab-dev/homelab/roles/nodefacts"
	"github.com/homelab-dev/homelab/roles/pki"
)

// dirReader serves /etc/kubernetes/pki/* from a local directory, as a
// node would over SSH.
type dirReader struct{ dir string }

func (d dirReader) Read(_ context.Context, p string) ([]byte, error) {
	rel, ok := strings.CutPrefix(p, nodefacts.PKIDir+"/")
	if !ok {
		return nil, &fs.PathError{Op: "read", Path: p, Err: fs.ErrNotExist}
	}
	return os.ReadFile(filepath.Join(d.dir, filepath.FromSlash(rel)))
}

// kubeadmLikePKI writes what `kubeadm init phase certs` leaves for the
// bundle's files: three self-signed CAs with PKCS#1 keys, and the
// service-account key pair.
func kubeadmLikePKI(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "etcd"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, ca := range []struct{ base, cn string }{{"ca", "kubernetes"}, {"front-proxy-ca", "front-proxy-ca"}, {"etcd/ca", "etcd-ca"}} {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: ca.cn},
			NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(10 * 365 * 24 * time.Hour),
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, BasicConstraintsValid: true, IsCA: true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		write(t, dir, ca.base+".crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
		write(t, dir, ca.base+".key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	}
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "sa.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(sa)}))
	pub, _ := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	write(t, dir, "sa.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
	return dir
}

func write(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, dir, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// checkBundleFrom reads dir's PKI and checks the bundle holds exactly its
// CAs and keys, and that the private copy is gone.
func checkBundleFrom(t *testing.T, dir string) *pki.Bundle {
	t.Helper()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	b, err := ReadBundle(context.Background(), dirReader{dir}, "cp-1")
	if err != nil {
		t.Fatal(err)
	}
	c := b.Talos.Certs
	for _, f := range []struct {
		name string
		got  []byte
	}{
		{"ca.crt", c.K8s.Crt}, {"ca.key", c.K8s.Key},
		{"etcd/ca.crt", c.Etcd.Crt}, {"etcd/ca.key", c.Etcd.Key},
		{"front-proxy-ca.crt", c.K8sAggregator.Crt}, {"front-proxy-ca.key", c.K8sAggregator.Key},
		{"sa.key", c.K8sServiceAccount.Key},
	} {
		if !bytes.Equal(f.got, read(t, dir, f.name)) {
			t.Errorf("bundle's %s differs from the node's", f.name)
		}
	}
	if err := b.Validate(); err != nil {
		t.Errorf("bundle incomplete: %v", err)
	}
	if b.BootstrapToken() == "" || b.EncryptionSecret() == "" || len(b.VRRPPassword) != 8 {
		t.Errorf("bundle lacks fresh secrets: token %t, key %t, vrrp %d chars", b.BootstrapToken() != "", b.EncryptionSecret() != "", len(b.VRRPPassword))
	}
	// The files a control-plane node gets from the bundle are the node's.
	files, err := b.ControlPlaneFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if want := read(t, dir, strings.TrimPrefix(f.Path, nodefacts.PKIDir+"/")); !bytes.Equal(f.Content, want) {
			t.Errorf("rendered %s differs from the node's: up would rewrite it", f.Path)
		}
	}
	left, _ := os.ReadDir(tmp)
	if len(left) != 0 {
		t.Errorf("the private copy of the PKI was left behind: %v", left)
	}
	// Round trip through the stored form.
	data, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := pki.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if !SameIdentity(back, b) {
		t.Error("the stored bundle is not the same cluster")
	}
	return b
}

func TestReadBundleFromKubeadmLikePKI(t *testing.T) {
	checkBundleFrom(t, kubeadmLikePKI(t))
}

// TestReadBundleFromKubeadmsPKI uses the PKI kubeadm itself generates.
func TestReadBundleFromKubeadmsPKI(t *testing.T) {
	kubeadmBin := toolstest.Require(t, "kubeadm")
	dir := t.TempDir()
	out, err := exec.Command(kubeadmBin, "init", "phase", "certs", "all", "--cert-dir", dir, "--kubernetes-version", tools.KubernetesVersion).CombinedOutput()
	if err != nil {
		t.Fatalf("kubeadm init phase certs all: %v\n%s", err, out)
	}
	checkBundleFrom(t, dir)
}

func TestReadBundleRefuses(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(t *testing.T, dir string)
		// wantIn are words the error must hold: the node and the file.
		wantIn []string
	}{
		{"missing CA key", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "etcd", "ca.key")) }, []string{"cp-1", "etcd/ca.key", "--from"}},
		{"sa.pub of another key", func(t *testing.T, dir string) {
			other := kubeadmLikePKI(t)
			write(t, dir, "sa.pub", read(t, other, "sa.pub"))
		}, []string{"cp-1", "sa.pub"}},
		{"CA key of another CA", func(t *testing.T, dir string) {
			other := kubeadmLikePKI(t)
			write(t, dir, "ca.key", read(t, other, "ca.key"))
		}, []string{"cp-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := kubeadmLikePKI(t)
			tt.break_(t, dir)
			t.Setenv("TMPDIR", t.TempDir())
			_, err := ReadBundle(context.Background(), dirReader{dir}, "cp-1")
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.wantIn {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not name %q: %v", w, err)
				}
			}
		})
	}
}

func TestVRRPPassword(t *testing.T) {
	tests := []struct {
		name, conf, want string
	}{
		{"rendered VRRPv2", "vrrp_instance API_VIP {\n    authentication {\n        auth_type PASS\n        auth_pass s3cretPw\n    }\n}\n", "s3cretPw"},
		{"quoted", "  auth_pass \"abc123\"\n", "abc123"},
		{"longer than keepalived uses", "auth_pass 0123456789\n", "01234567"},
		{"VRRPv3, none", "vrrp_instance API_VIP {\n    state BACKUP\n}\n", ""},
		{"commented out", "# auth_pass old\n", ""},
		{"no file", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := VRRPPassword([]byte(tt.conf)); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

const manifestWithEncryption = `apiVersion: v1
kind: Pod
metadata: {name: kube-apiserver, namespace: kube-system}
spec:
  containers:
  - name: kube-apiserver
    command:
    - kube-apiserver
    - --advertise-address=10.77.0.120
    - --encryption-provider-config=/etc/kubernetes/enc/config.yaml
    volumeMounts:
    - {name: k8s-certs, mountPath: /etc/kubernetes/pki, readOnly: true}
    - {name: enc, mountPath: /etc/kubernetes/enc, readOnly: true}
  volumes:
  - name: k8s-certs
    hostPath: {path: /etc/kubernetes/pki, type: DirectoryOrCreate}
  - name: enc
    hostPath: {path: /srv/encryption, type: DirectoryOrCreate}
`

func TestEncryptionFlag(t *testing.T) {
	tests := []struct {
		name, manifest, flag, host string
	}{
		{"mapped through a hostPath volume", manifestWithEncryption, "/etc/kubernetes/enc/config.yaml", "/srv/encryption/config.yaml"},
		{"no flag", strings.Replace(manifestWithEncryption, "    - --encryption-provider-config=/etc/kubernetes/enc/config.yaml\n", "", 1), "", ""},
		{"no volume: the same path", strings.Replace(manifestWithEncryption, "name: enc, mountPath", "name: other, mountPath", 1), "/etc/kubernetes/enc/config.yaml", "/etc/kubernetes/enc/config.yaml"},
		{"in args, as a --flag value pair", strings.Replace(manifestWithEncryption, "    - --encryption-provider-config=/etc/kubernetes/enc/config.yaml\n",
			"    args:\n    - --encryption-provider-config\n    - /etc/kubernetes/enc/config.yaml\n", 1), "/etc/kubernetes/enc/config.yaml", "/srv/encryption/config.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			flag, host, err := EncryptionFlag([]byte(tt.manifest))
			if err != nil {
				t.Fatal(err)
			}
			if flag != tt.flag || host != tt.host {
				t.Errorf("got %q on %q, want %q on %q", flag, host, tt.flag, tt.host)
			}
		})
	}
}

func TestParseEncryption(t *testing.T) {
	const key = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTMyYiE=" // 32 bytes
	ours, err := kubeadm.Encryption(key)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, conf string
		providers  []string
		key, kname string
		fails      bool
	}{
		{"ours", string(ours), []string{"secretbox", "identity"}, key, OurKeyName, false},
		{"aescbc first", `apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
- resources: [secrets]
  providers:
  - aescbc: {keys: [{name: key1, secret: ` + key + `}]}
  - identity: {}
`, []string{"aescbc", "identity"}, "", "", false},
		{"secretbox second, another name", `apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
- resources: [configmaps]
  providers: [{identity: {}}]
- resources: [secrets]
  providers:
  - identity: {}
  - secretbox: {keys: [{name: key1, secret: ` + key + `}]}
`, []string{"identity", "secretbox"}, key, "key1", false},
		{"short key", `kind: EncryptionConfiguration
resources:
- resources: [secrets]
  providers: [{secretbox: {keys: [{name: k, secret: c2hvcnQ=}]}}]
`, nil, "", "", true},
		{"not one", "kind: Pod\n", nil, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := ParseEncryption([]byte(tt.conf))
			if (err != nil) != tt.fails {
				t.Fatalf("error %v, want failure %t", err, tt.fails)
			}
			if tt.fails {
				return
			}
			if strings.Join(e.Providers, ",") != strings.Join(tt.providers, ",") || e.SecretboxKey != tt.key || e.SecretboxKeyName != tt.kname {
				t.Errorf("got providers %v key %q named %q", e.Providers, e.SecretboxKey, e.SecretboxKeyName)
			}
		})
	}
}
