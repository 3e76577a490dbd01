// Package pki is the cluster's root of trust: the secrets generated once
// (with Talos machinery, as `talosctl gen secrets` does) and injected into
// every render, so the same inventory and bundle always give the same files,
// and a node added years later still gets certificates from the same CAs.
package pki

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"

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

func (b *Bundle) check() error {
	var errs []error
	t := b.Talos
	if t == nil || t.Certs == nil || t.Secrets == nil {
		return errors.New("secrets bundle: talos section incomplete; regenerate with `homelab secrets init`")
	}
	for _, ca := range []struct {
		name string
		kp   *cryptox509.PEMEncodedCertificateAndKey
	}{{"talos.Certs.K8s", t.Certs.K8s}, {"talos.Certs.Etcd", t.Certs.Etcd}, {"talos.Certs.K8sAggregator", t.Certs.K8sAggregator}} {
		if ca.kp == nil || len(ca.kp.Crt) == 0 || len(ca.kp.Key) == 0 {
			errs = append(errs, fmt.Errorf("secrets bundle: %s is missing", ca.name))
		}
	}
	if t.Certs.K8sServiceAccount == nil || len(t.Certs.K8sServiceAccount.Key) == 0 {
		errs = append(errs, errors.New("secrets bundle: talos.Certs.K8sServiceAccount is missing"))
	}
	if t.Secrets.BootstrapToken == "" {
		errs = append(errs, errors.New("secrets bundle: talos.Secrets.BootstrapToken is missing"))
	}
	if t.Secrets.SecretboxEncryptionSecret == "" {
		errs = append(errs, errors.New("secrets bundle: talos.Secrets.SecretboxEncryptionSecret is missing"))
	}
	if len(b.VRRPPassword) == 0 || len(b.VRRPPassword) > 8 {
		errs = append(errs, errors.New("secrets bundle: vrrpPassword must be 1-8 characters"))
	}
	return errors.Join(errs...)
}

// CACertHash pins the Kubernetes CA for joins, in kubeadm's caCertHashes
// form: sha256 of the CA's SubjectPublicKeyInfo.
func (b *Bundle) CACertHash() (string, error) {
	block, _ := pem.Decode(b.Talos.Certs.K8s.Crt)
	if block == nil {
		return "", errors.New("secrets bundle: Kubernetes CA certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", fmt.Errorf("secrets bundle: Kubernetes CA: %w", err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// BootstrapToken is the kubeadm token joins authenticate with.
func (b *Bundle) BootstrapToken() string { return b.Talos.Secrets.BootstrapToken }

// EncryptionSecret is the base64 key for secrets encryption at rest.
func (b *Bundle) EncryptionSecret() string { return b.Talos.Secrets.SecretboxEncryptionSecret }

// SecretStrings lists the bundle's secret values in the forms they may take
// in a file or log, so tests and the provisioner can prove none leaked.
func (b *Bundle) SecretStrings() []string {
	t := b.Talos
	out := []string{t.Secrets.BootstrapToken, t.Secrets.SecretboxEncryptionSecret, b.VRRPPassword}
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
