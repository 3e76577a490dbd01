package pki

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestNewMarshalParseRoundTrip(t *testing.T) {
	b, err := New()
	if err != nil {
		t.Fatal(err)
	}
	data, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if again.BootstrapToken() != b.BootstrapToken() || again.VRRPPassword != b.VRRPPassword ||
		string(again.Talos.Certs.K8s.Key) != string(b.Talos.Certs.K8s.Key) {
		t.Error("round trip lost secrets")
	}
	if !regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`).MatchString(b.BootstrapToken()) {
		t.Errorf("bootstrap token %q is not in kubeadm's form", b.BootstrapToken())
	}
	if n := len(b.VRRPPassword); n < 1 || n > 8 {
		t.Errorf("VRRP password of %d characters; VRRPv2 PASS allows 8", n)
	}
	other, _ := New()
	if other.BootstrapToken() == b.BootstrapToken() || string(other.Talos.Certs.K8s.Crt) == string(b.Talos.Certs.K8s.Crt) {
		t.Error("two bundles share secrets")
	}
}

func TestParseRejectsIncompleteBundles(t *testing.T) {
	b, _ := New()
	b.Talos.Certs.Etcd = nil
	b.VRRPPassword = "much-too-long"
	data, _ := b.Marshal()
	_, err := Parse(data)
	if err == nil || !strings.Contains(err.Error(), "talos.Certs.Etcd") || !strings.Contains(err.Error(), "vrrpPassword") {
		t.Errorf("got %v", err)
	}
	if _, err := Parse([]byte("apiVersion: v1\nkind: Secret\n")); err == nil {
		t.Error("accepted a Kubernetes Secret as a bundle")
	}
	if _, err := Parse([]byte("apiVersion: homelab.dev/v1alpha1\nkind: SecretsBundle\nextra: 1\n")); err == nil {
		t.Error("accepted an unknown field")
	}
}

func TestCACertHashPinsTheKubernetesCA(t *testing.T) {
	b, _ := New()
	got, err := b.CACertHash()
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b.Talos.Certs.K8s.Crt)
	cert, _ := x509.ParseCertificate(block.Bytes)
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	if want := "sha256:" + hex.EncodeToString(sum[:]); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if !cert.IsCA {
		t.Error("Kubernetes CA is not a CA")
	}
}

func TestControlPlaneFiles(t *testing.T) {
	b, _ := New()
	files, err := b.ControlPlaneFiles()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		seen[f.Path] = true
		isKey := strings.HasSuffix(f.Path, ".key")
		if isKey != f.Secret || (isKey && f.Mode != 0o600) {
			t.Errorf("%s: secret=%v mode=%o", f.Path, f.Secret, f.Mode)
		}
	}
	for _, p := range []string{"ca.crt", "ca.key", "etcd/ca.crt", "etcd/ca.key", "front-proxy-ca.crt", "front-proxy-ca.key", "sa.key", "sa.pub"} {
		if !seen[CertificatesDir+"/"+p] {
			t.Errorf("missing %s", p)
		}
	}
}

func TestSecretStringsCoverEverySecret(t *testing.T) {
	b, _ := New()
	s := strings.Join(b.SecretStrings(), "\n")
	for _, want := range []string{b.BootstrapToken(), b.EncryptionSecret(), b.VRRPPassword, "PRIVATE KEY"} {
		if !strings.Contains(s, want) {
			t.Errorf("SecretStrings lacks %q", want)
		}
	}
}

func TestClientCertsChainToTheBundlesCAs(t *testing.T) {
	b, _ := New()
	for _, ca := range []struct {
		name     string
		crt, key []byte
	}{{"kubernetes", b.Talos.Certs.K8s.Crt, b.Talos.Certs.K8s.Key}, {"etcd", b.Talos.Certs.Etcd.Crt, b.Talos.Certs.Etcd.Key}} {
		crt, _, err := ClientCert(ca.crt, ca.key, "tester", "system:masters", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(crt)
		leaf, _ := x509.ParseCertificate(block.Bytes)
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(ca.crt)
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s: %v", ca.name, err)
		}
		if leaf.Subject.CommonName != "tester" || leaf.Subject.Organization[0] != "system:masters" || leaf.NotAfter.After(time.Now().Add(61*time.Minute)) {
			t.Errorf("%s: subject %v until %v", ca.name, leaf.Subject, leaf.NotAfter)
		}
	}
	if _, err := b.EtcdClient("x", time.Minute); err != nil {
		t.Error(err)
	}
	if _, _, err := ClientCert([]byte("junk"), b.Talos.Certs.K8s.Key, "x", "", time.Hour); err == nil {
		t.Error("minted from a CA that is not PEM")
	}
}

// Each bad value a hand-edited or copied bundle can hold is named by its
// field, all at once, before anything renders.
func TestParseRejectsBadValues(t *testing.T) {
	other, err := New()
	if err != nil {
		t.Fatal(err)
	}
	good, err := New()
	if err != nil {
		t.Fatal(err)
	}
	goodYAML, _ := good.Marshal()
	fresh := func() *Bundle {
		b, err := Parse(goodYAML)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		name  string
		edit  func(b *Bundle)
		field string
	}{
		{"token without a dot", func(b *Bundle) { b.Talos.Secrets.BootstrapToken = "abcdef0123456789abcdef" }, "BootstrapToken"},
		{"token in capitals", func(b *Bundle) { b.Talos.Secrets.BootstrapToken = "ABCDEF.0123456789abcdef" }, "BootstrapToken"},
		{"token with a shell word", func(b *Bundle) { b.Talos.Secrets.BootstrapToken = "abcdef.01234567$(reboot)" }, "BootstrapToken"},
		{"token too short", func(b *Bundle) { b.Talos.Secrets.BootstrapToken = "abc.0123" }, "BootstrapToken"},
		{"secretbox key not base64", func(b *Bundle) { b.Talos.Secrets.SecretboxEncryptionSecret = "not base64!" }, "SecretboxEncryptionSecret"},
		{"secretbox key 16 bytes", func(b *Bundle) { b.Talos.Secrets.SecretboxEncryptionSecret = "MDEyMzQ1Njc4OWFiY2RlZg==" }, "SecretboxEncryptionSecret"},
		{"vrrp password empty", func(b *Bundle) { b.VRRPPassword = "" }, "vrrpPassword"},
		{"vrrp password with a quote", func(b *Bundle) { b.VRRPPassword = `ab"cd` }, "vrrpPassword"},
		{"vrrp password with a brace", func(b *Bundle) { b.VRRPPassword = "ab}cd" }, "vrrpPassword"},
		{"vrrp password with a space", func(b *Bundle) { b.VRRPPassword = "ab cd" }, "vrrpPassword"},
		{"CA key of another CA", func(b *Bundle) { b.Talos.Certs.K8s.Key = other.Talos.Certs.K8s.Key }, "talos.Certs.K8s"},
		{"etcd CA certificate garbage", func(b *Bundle) {
			b.Talos.Certs.Etcd.Crt = []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
		}, "talos.Certs.Etcd"},
		{"front-proxy CA not PEM", func(b *Bundle) { b.Talos.Certs.K8sAggregator.Crt = []byte("hello") }, "talos.Certs.K8sAggregator"},
		{"service-account key not a key", func(b *Bundle) {
			b.Talos.Certs.K8sServiceAccount.Key = []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
		}, "K8sServiceAccount"},
	} {
		b := fresh()
		c.edit(b)
		data, _ := b.Marshal()
		_, err = Parse(data)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: got %v, want an error naming %s", c.name, err, c.field)
		}
	}
	// Every problem at once.
	b := fresh()
	b.VRRPPassword, b.Talos.Secrets.BootstrapToken = "", "x"
	data, _ := b.Marshal()
	if _, err := Parse(data); err == nil || !strings.Contains(err.Error(), "vrrpPassword") || !strings.Contains(err.Error(), "BootstrapToken") {
		t.Errorf("two problems, got %v", err)
	}
}
