package adopt

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"k8s.io/client-go/util/keyutil"
	"sigs.k8s.io/yaml"

	"github.com/homelab-dev/homelab/roles/nodefacts"
	"github.com/homelab-dev/homelab/roles/pki"
)

// Reader reads a file on a node; an error wrapping fs.ErrNotExist when it
// is absent (infra/ssh.Client is one).
type Reader interface {
	Read(ctx context.Context, path string) ([]byte, error)
}

// ReadBundle reads a kubeadm control-plane node's PKI into a secrets
// bundle (Talos machinery's NewBundleFromKubernetesPKI, as `talosctl gen
// secrets --from-kubernetes-pki` does). The files pass through a private
// temporary directory (0700, files 0600) that is removed before it
// returns. The bundle gets a fresh bootstrap token, encryption key and
// VRRP password; the caller keeps the cluster's own where it has them.
func ReadBundle(ctx context.Context, r Reader, node string) (*pki.Bundle, error) {
	dir, err := os.MkdirTemp("", "homelab-adopt-pki-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Mkdir(filepath.Join(dir, "etcd"), 0o700); err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, f := range nodefacts.IdentityFiles {
		p := path.Join(nodefacts.PKIDir, f)
		data, err := r.Read(ctx, p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %s is missing: not a control-plane node kubeadm set up (name one that is with --from)", node, p)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: reading %s: %w", node, p, err)
		}
		files[f] = data
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(f)), data, 0o600); err != nil {
			return nil, err
		}
	}
	tb, err := secrets.NewBundleFromKubernetesPKI(dir, "", config.TalosVersionCurrent)
	if err != nil {
		return nil, fmt.Errorf("%s: reading the PKI in %s: %w", node, nodefacts.PKIDir, err)
	}
	for _, ca := range []string{"ca", "front-proxy-ca", "etcd/ca"} {
		if err := keyOfCert(files[ca+".key"], files[ca+".crt"]); err != nil {
			return nil, fmt.Errorf("%s: %s/%s.key does not belong to %s.crt: %w", node, nodefacts.PKIDir, ca, ca, err)
		}
	}
	if err := samePublicKey(files["sa.key"], files["sa.pub"]); err != nil {
		return nil, fmt.Errorf("%s: %s/sa.pub does not belong to sa.key: %w", node, nodefacts.PKIDir, err)
	}
	b, err := pki.FromTalos(tb)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", node, err)
	}
	return b, nil
}

func samePublicKey(keyPEM, pubPEM []byte) error {
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return fmt.Errorf("unsupported key type %T", key)
	}
	pubs, err := keyutil.ParsePublicKeysPEM(pubPEM)
	if err != nil {
		return err
	}
	type equaler interface{ Equal(crypto.PublicKey) bool }
	if e, ok := signer.Public().(equaler); !ok || len(pubs) != 1 || !e.Equal(pubs[0]) {
		return errors.New("the public key differs")
	}
	return nil
}

func keyOfCert(keyPEM, certPEM []byte) error {
	cert, err := nodefacts.ParseCertPEM(certPEM)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKIXPublicKey(cert.PublicKey)
	if err != nil {
		return err
	}
	return samePublicKey(keyPEM, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// SameIdentity reports whether two bundles hold the same cluster: the same
// three CAs and service-account key. Tokens and passwords may differ.
func SameIdentity(a, b *pki.Bundle) bool {
	ca, cb := a.Talos.Certs, b.Talos.Certs
	return bytes.Equal(ca.K8s.Crt, cb.K8s.Crt) && bytes.Equal(ca.Etcd.Crt, cb.Etcd.Crt) &&
		bytes.Equal(ca.K8sAggregator.Crt, cb.K8sAggregator.Crt) &&
		samePublicKey(ca.K8sServiceAccount.Key, mustPub(cb.K8sServiceAccount.Key)) == nil
}

func mustPub(keyPEM []byte) []byte {
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil
	}
	der, err := x509.MarshalPKIXPublicKey(signer.Public())
	if err != nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// authPass matches keepalived's `auth_pass SECRET` (optionally quoted).
var authPass = regexp.MustCompile(`(?m)^\s*auth_pass\s+"?([^"\s]+)"?`)

// VRRPPassword returns the auth_pass of a keepalived.conf, "" when it has
// none (VRRPv3, or no authentication). keepalived uses at most 8
// characters of it, as does our bundle.
func VRRPPassword(conf []byte) string {
	m := authPass.FindSubmatch(conf)
	if m == nil {
		return ""
	}
	pw := string(m[1])
	if len(pw) > 8 {
		pw = pw[:8]
	}
	return pw
}

// Encryption is what a cluster's kube-apiserver does for encryption at
// rest.
type Encryption struct {
	// Flag is --encryption-provider-config as the apiserver sees it; ""
	// when the flag is absent.
	Flag string
	// HostPath is that file on the node (through the manifest's hostPath
	// volumes).
	HostPath string
	// Providers for Secrets, in order (secretbox, aescbc, identity ...).
	Providers []string
	// SecretboxKey and SecretboxKeyName are the first key of the secretbox
	// provider, when there is one.
	SecretboxKey, SecretboxKeyName string
	// Err is why the config could not be read, if it could not.
	Err error
}

// EncryptionFlag finds --encryption-provider-config in a kube-apiserver
// static pod manifest and maps it to the file on the node through the
// pod's hostPath volumes.
func EncryptionFlag(manifest []byte) (flag, hostPath string, err error) {
	pod, err := nodefacts.ParsePod(manifest)
	if err != nil {
		return "", "", fmt.Errorf("kube-apiserver manifest: %w", err)
	}
	v := nodefacts.PodFlags(pod)["encryption-provider-config"]
	if v == "" {
		return "", "", nil
	}
	flag, hostPath = v, v
	best := ""
	for _, m := range nodefacts.Component(pod).VolumeMounts {
		if (v == m.MountPath || strings.HasPrefix(v, strings.TrimSuffix(m.MountPath, "/")+"/")) && len(m.MountPath) > len(best) {
			for _, vol := range pod.Spec.Volumes {
				if vol.Name == m.Name && vol.HostPath != nil {
					best = m.MountPath
					hostPath = path.Join(vol.HostPath.Path, strings.TrimPrefix(v, m.MountPath))
				}
			}
		}
	}
	return flag, hostPath, nil
}

// ParseEncryption reads an EncryptionConfiguration: the providers for
// Secrets and the secretbox key, if any.
func ParseEncryption(data []byte) (Encryption, error) {
	var cfg struct {
		Kind      string `json:"kind"`
		Resources []struct {
			Resources []string                     `json:"resources"`
			Providers []map[string]json.RawMessage `json:"providers"`
		} `json:"resources"`
	}
	var e Encryption
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return e, fmt.Errorf("not an EncryptionConfiguration: %w", err)
	}
	if cfg.Kind != "EncryptionConfiguration" {
		return e, fmt.Errorf("kind is %q, not EncryptionConfiguration", cfg.Kind)
	}
	for _, r := range cfg.Resources {
		if !slices.Contains(r.Resources, "secrets") && !slices.Contains(r.Resources, "*.*") && !slices.Contains(r.Resources, "*.") {
			continue
		}
		for _, p := range r.Providers {
			for name, raw := range p {
				e.Providers = append(e.Providers, name)
				if name != "secretbox" || e.SecretboxKey != "" {
					continue
				}
				var sb struct {
					Keys []struct{ Name, Secret string } `json:"keys"`
				}
				if err := json.Unmarshal(raw, &sb); err != nil || len(sb.Keys) == 0 {
					return e, fmt.Errorf("secretbox provider without keys")
				}
				key, err := base64.StdEncoding.DecodeString(sb.Keys[0].Secret)
				if err != nil || len(key) != 32 {
					return e, fmt.Errorf("secretbox key %q is not 32 bytes of base64", sb.Keys[0].Name)
				}
				e.SecretboxKey, e.SecretboxKeyName = sb.Keys[0].Secret, sb.Keys[0].Name
			}
		}
		break
	}
	return e, nil
}
