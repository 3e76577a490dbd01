package pki

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"fmt"

	"github.com/homelab-dev/homelab/roles/file"
	"github.com/homelab-dev/homelab/roles/nodefacts"
	"k8s.io/client-go/util/keyutil"
)

// CertificatesDir is where kubeadm looks for (and writes) the cluster PKI.
const CertificatesDir = nodefacts.PKIDir

// ControlPlaneFiles are the CA files a control-plane node needs before
// `kubeadm init` or `kubeadm join --control-plane`: with them in place
// kubeadm signs every leaf certificate from our CAs, and joins never depend
// on the uploaded-certs secret that expires after two hours.
func (b *Bundle) ControlPlaneFiles() ([]file.File, error) {
	c := b.Talos.Certs
	saPub, err := publicKeyPEM(c.K8sServiceAccount.Key)
	if err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}
	dir := CertificatesDir
	return []file.File{
		{Path: dir + "/ca.crt", Mode: 0o644, Content: c.K8s.Crt},
		{Path: dir + "/ca.key", Mode: 0o600, Content: c.K8s.Key, Secret: true},
		{Path: dir + "/etcd/ca.crt", Mode: 0o644, Content: c.Etcd.Crt},
		{Path: dir + "/etcd/ca.key", Mode: 0o600, Content: c.Etcd.Key, Secret: true},
		{Path: dir + "/front-proxy-ca.crt", Mode: 0o644, Content: c.K8sAggregator.Crt},
		{Path: dir + "/front-proxy-ca.key", Mode: 0o600, Content: c.K8sAggregator.Key, Secret: true},
		{Path: dir + "/sa.key", Mode: 0o600, Content: c.K8sServiceAccount.Key, Secret: true},
		{Path: dir + "/sa.pub", Mode: 0o644, Content: saPub},
	}, nil
}

func publicKeyPEM(keyPEM []byte) ([]byte, error) {
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported key type %T", key)
	}
	der, err := x509.MarshalPKIXPublicKey(signer.Public())
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}
