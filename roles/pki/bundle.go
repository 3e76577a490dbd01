// Package pki is the cluster's root of trust: the secrets generated once
// (with Talos machinery, as `talosctl gen secrets` does) and injected into
// every render, so the same inventory and bundle always give the same files,
// and a node added years later still gets certificates from the same CAs.
package pki

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strings"

	cryptox509 "github.com/siderolabs/crypto/x509"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"sigs.k8s.io/yaml"
)

const (
	APIVersion = "homelab.dev/v1alpha1"
	Kind       = "SecretsBundle"
)

// Bundle holds every secret the cluster is built from.
type Bundle struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Talos carries the CAs (Kubernetes, etcd, front-proxy), the
	// service-account key, the bootstrap token and the encryption secret.
	Talos *secrets.Bundle `json:"talos"`
	// VRRPPassword authenticates keepalived's adverts (VRRPv2 PASS: at most
	// 8 characters).
	VRRPPassword string `json:"vrrpPassword"`
}

// New generates a fresh bundle.
func New() (*Bundle, error) {
	tb, err := secrets.NewBundle(secrets.NewClock(), config.TalosVersionCurrent)
	if err != nil {
		return nil, fmt.Errorf("generating cluster secrets: %w", err)
	}
	pw, err := randomString(8)
	if err != nil {
		return nil, err
	}
	return &Bundle{APIVersion: APIVersion, Kind: Kind, Talos: tb, VRRPPassword: pw}, nil
}

// FromTalos wraps Talos cluster secrets, such as those
// secrets.NewBundleFromKubernetesPKI reads from a cluster kubeadm built,
// with a fresh VRRP password, and checks the result is complete.
func FromTalos(tb *secrets.Bundle) (*Bundle, error) {
	pw, err := randomString(8)
	if err != nil {
		return nil, err
	}
	b := &Bundle{APIVersion: APIVersion, Kind: Kind, Talos: tb, VRRPPassword: pw}
	return b, b.Validate()
}

// Validate checks the bundle is complete, as Parse does.
func (b *Bundle) Validate() error { return b.check() }

// Parse reads a bundle written by Marshal and checks it is complete.
func Parse(data []byte) (*Bundle, error) {
	var b Bundle
	if err := yaml.UnmarshalStrict(data, &b); err != nil {
		return nil, fmt.Errorf("reading secrets bundle: %w", err)
	}
	if b.APIVersion != APIVersion || b.Kind != Kind {
		return nil, fmt.Errorf("not a secrets bundle (apiVersion %q kind %q); create one with `homelab secrets init`", b.APIVersion, b.Kind)
	}
	if err := b.check(); err != nil {
		return nil, err
	}
	return &b, nil
}

// Marshal serialises the bundle. The result is secret: write it 0600.
func (b *Bundle) Marshal() ([]byte, error) { return yaml.Marshal(b) }

// Values kubeadm, keepalived and the apiserver accept. A bundle is typed
// or copied by hand: anything else would fail deep inside a node's run,
// or reach a shell or keepalived.conf.
var (
	tokenPattern    = regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)
	vrrpPassPattern = regexp.MustCompile(`^[A-Za-z0-9._+-]{1,8}$`)
)

// check lists every problem at once, each with the field's path in the
// bundle file and the fix.
func (b *Bundle) check() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("secrets bundle: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	t := b.Talos
	if t == nil || t.Certs == nil || t.Secrets == nil {
		return errors.New("secrets bundle: talos section incomplete; regenerate with `homelab secrets init`")
	}
	for _, ca := range []struct {
		field string
		kp    *cryptox509.PEMEncodedCertificateAndKey
	}{{"talos.Certs.K8s", t.Certs.K8s}, {"talos.Certs.Etcd", t.Certs.Etcd}, {"talos.Certs.K8sAggregator", t.Certs.K8sAggregator}} {
		if ca.kp == nil || len(ca.kp.Crt) == 0 || len(ca.kp.Key) == 0 {
			bad(ca.field, "missing; restore the bundle from its backup")
			continue
		}
		if err := checkCA(ca.kp.Crt, ca.kp.Key); err != nil {
			bad(ca.field, "%v; restore the bundle from its backup", err)
		}
	}
	if t.Certs.K8sServiceAccount == nil || len(t.Certs.K8sServiceAccount.Key) == 0 {
		bad("talos.Certs.K8sServiceAccount", "missing; restore the bundle from its backup")
	} else if _, err := parseKey(t.Certs.K8sServiceAccount.Key); err != nil {
		bad("talos.Certs.K8sServiceAccount.Key", "%v", err)
	}
	switch tok := t.Secrets.BootstrapToken; {
	case tok == "":
		bad("talos.Secrets.BootstrapToken", "missing")
	case !tokenPattern.MatchString(tok):
		bad("talos.Secrets.BootstrapToken", "not a kubeadm token; it must be 6 then 16 characters of a-z and 0-9, joined by a dot (kubeadm token generate makes one)")
	}
	if sb := t.Secrets.SecretboxEncryptionSecret; sb == "" {
		bad("talos.Secrets.SecretboxEncryptionSecret", "missing")
	} else if key, err := base64.StdEncoding.DecodeString(sb); err != nil || len(key) != 32 {
		bad("talos.Secrets.SecretboxEncryptionSecret", "must be 32 bytes in base64 (head -c 32 /dev/urandom | base64); the apiserver refuses any other secretbox key")
	}
	if !vrrpPassPattern.MatchString(b.VRRPPassword) {
		bad("vrrpPassword", "must be 1-8 characters of A-Z, a-z, 0-9 and . _ + - (VRRPv2's PASS authentication takes 8; other characters would break keepalived.conf)")
	}
	return errors.Join(errs...)
}

// checkCA: a PEM certificate of a CA and the private key that matches it.
func checkCA(crtPEM, keyPEM []byte) error {
	block, _ := pem.Decode(crtPEM)
	if block == nil {
		return errors.New("the certificate is not PEM")
	}
	crt, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("the certificate does not parse: %w", err)
	}
	if !crt.IsCA {
		return errors.New("the certificate is not a CA's")
	}
	if _, err := tls.X509KeyPair(crtPEM, keyPEM); err != nil {
		return fmt.Errorf("the key does not match the certificate: %w", err)
	}
	return nil
}

func parseKey(keyPEM []byte) (any, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("not PEM")
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	return nil, errors.New("not a private key")
}

// NodeNameOf is the node a kubelet client certificate was issued for (its
// CN system:node:NAME), "" when the PEM holds none.
func NodeNameOf(certPEM []byte) string {
	for rest := certPEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return ""
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			continue
		}
		if name, ok := strings.CutPrefix(cert.Subject.CommonName, "system:node:"); ok {
			return name
		}
	}
}

// CACertHash pins the Kubernetes CA (CAPin).
func (b *Bundle) CACertHash() (string, error) {
	pin, err := CAPin(b.Talos.Certs.K8s.Crt)
	if err != nil {
		return "", fmt.Errorf("secrets bundle: Kubernetes CA: %w", err)
	}
	return pin, nil
}

// BootstrapToken is the bundle's token: the seed each node's join token
// is derived from.
func (b *Bundle) BootstrapToken() string { return b.Talos.Secrets.BootstrapToken }

// JoinToken is the kubeadm bootstrap token node joins with, derived from
// the bundle's token so renders stay deterministic. Each node has its own:
// its join creates it in the cluster just before, and deletes it right
// after, so no token outlives a join and parallel joins never share one.
func (b *Bundle) JoinToken(node string) string {
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789"
	mac := hmac.New(sha256.New, []byte(b.Talos.Secrets.BootstrapToken))
	mac.Write([]byte("homelab join token\x00" + node))
	sum := mac.Sum(nil)
	out := make([]byte, 22)
	for i := range out {
		out[i] = chars[int(sum[i])%len(chars)]
	}
	return string(out[:6]) + "." + string(out[6:])
}

// CAPin is kubeadm's pin of a CA certificate (caCertHashes' form): sha256
// of its SubjectPublicKeyInfo. Two clusters' CAs never share one.
func CAPin(certPEM []byte) (string, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return "", errors.New("not a PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// EncryptionSecret is the base64 key for secrets encryption at rest.
func (b *Bundle) EncryptionSecret() string { return b.Talos.Secrets.SecretboxEncryptionSecret }

// SecretStrings lists the bundle's secret values in the forms they may take
// in a file or log, the join tokens of nodes included, so tests and the
// provisioner can prove none leaked.
func (b *Bundle) SecretStrings(nodes ...string) []string {
	t := b.Talos
	out := []string{t.Secrets.BootstrapToken, t.Secrets.SecretboxEncryptionSecret, b.VRRPPassword}
	for _, n := range nodes {
		tok := b.JoinToken(n)
		out = append(out, tok, tok[7:])
	}
	if _, secret, ok := bytes.Cut([]byte(t.Secrets.BootstrapToken), []byte(".")); ok {
		out = append(out, string(secret))
	}
	for _, k := range [][]byte{t.Certs.K8s.Key, t.Certs.Etcd.Key, t.Certs.K8sAggregator.Key, t.Certs.K8sServiceAccount.Key} {
		if block, _ := pem.Decode(k); block != nil {
			out = append(out, string(pem.EncodeToMemory(block)))
		}
	}
	return out
}

const alphabet = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"

func randomString(n int) (string, error) {
	out := make([]byte, n)
	for i := range out {
		v, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			return "", err
		}
		out[i] = alphabet[v.Int64()]
	}
	return string(out), nil
}
