package nodefacts

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"
)

// The kubelet's client credentials. kubeadm join's TLS bootstrap leaves
// kubelet.conf naming KubeletClientCert, the file the kubelet's certificate
// manager rotates; an old kubeadm init, or a hand-built cluster, embeds the
// certificate and its key in kubelet.conf instead (client-certificate-data,
// kubeadm #1317, #2185), and the kubelet goes on using that certificate
// whenever its store has none it can use.

// KubeletClientPair is the file the kubelet's certificate store
// (client-go's certificate.FileStore) keeps a pair issued at t in, of which
// KubeletClientCert is a symbolic link to the newest.
func KubeletClientPair(t time.Time) string {
	return KubeletPKIDir + "/kubelet-client-" + t.Format("2006-01-02-15-04-05") + ".pem"
}

// KubeletClient is how a node's kubelet authenticates to the API, as
// infra/scripts/nodefacts/kubeletclient.sh found it.
type KubeletClient struct {
	// Conf: kubelet.conf exists. Err says why it could not be read when
	// it does.
	Conf bool
	Err  error
	// User is the kubeconfig user of its current context.
	User string
	// CertFile and KeyFile are the files the user names, absolute.
	CertFile, KeyFile string
	// Embedded is the user's client-certificate-data; EmbeddedKey says it
	// has client-key-data too (never read).
	Embedded    *x509.Certificate
	EmbeddedKey bool
	// Current is kubelet-client-current.pem's certificate; nil when the
	// file is missing or holds none.
	Current *x509.Certificate
	// CAs are the cluster CA (ca.crt, else kubelet.conf's cluster's).
	CAs *x509.CertPool
}

// Embeds reports whether kubelet.conf embeds its client certificate.
func (k KubeletClient) Embeds() bool { return k.Embedded != nil }

// ParseKubeletClient reads what infra/scripts/nodefacts/kubeletclient.sh
// prints.
func ParseKubeletClient(out string) KubeletClient {
	var k KubeletClient
	conf, current, ca := Lines(out, "kubelet-conf-line"), Lines(out, "kubelet-current-line"), Lines(out, "kubelet-ca-line")
	for _, line := range strings.Split(out, "\n") {
		key, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		switch {
		case !ok:
		case key == "kubelet-conf-file":
			k.Conf = true
		case key == "kubelet-conf":
			if data, err := base64.StdEncoding.DecodeString(v); err == nil {
				k.Conf, conf = true, data
			}
		}
	}
	if c, err := ParseCertPEM(current); err == nil {
		k.Current = c
	}
	k.CAs = x509.NewCertPool()
	k.CAs.AppendCertsFromPEM(ca)
	if !k.Conf {
		return k
	}
	var cfg clientcmdv1.Config
	if err := yaml.Unmarshal(conf, &cfg); err != nil {
		k.Err = fmt.Errorf("%s: %w", KubeletConf, err)
		return k
	}
	cluster, user, err := currentOf(cfg)
	if err != nil {
		k.Err = fmt.Errorf("%s: %w", KubeletConf, err)
		return k
	}
	if len(ca) == 0 {
		k.CAs.AppendCertsFromPEM(cluster.CertificateAuthorityData)
	}
	k.User = user.name
	k.CertFile, k.KeyFile = absolute(user.ClientCertificate), absolute(user.ClientKey)
	k.EmbeddedKey = len(user.ClientKeyData) > 0
	if len(user.ClientCertificateData) > 0 {
		c, err := ParseCertPEM(user.ClientCertificateData)
		if err != nil {
			k.Err = fmt.Errorf("%s: client-certificate-data of user %s: %w", KubeletConf, user.name, err)
			return k
		}
		k.Embedded = c
	}
	return k
}

type namedUser struct {
	name string
	clientcmdv1.AuthInfo
}

// currentOf is the cluster and user of the kubeconfig's current context,
// as kubeadm's kubelet-finalize phase finds them.
func currentOf(cfg clientcmdv1.Config) (clientcmdv1.Cluster, namedUser, error) {
	if cfg.CurrentContext == "" {
		return clientcmdv1.Cluster{}, namedUser{}, errors.New("no current-context")
	}
	i := slices.IndexFunc(cfg.Contexts, func(c clientcmdv1.NamedContext) bool { return c.Name == cfg.CurrentContext })
	if i < 0 {
		return clientcmdv1.Cluster{}, namedUser{}, fmt.Errorf("current-context %q is not among its contexts", cfg.CurrentContext)
	}
	ctx := cfg.Contexts[i].Context
	var cluster clientcmdv1.Cluster
	if j := slices.IndexFunc(cfg.Clusters, func(c clientcmdv1.NamedCluster) bool { return c.Name == ctx.Cluster }); j >= 0 {
		cluster = cfg.Clusters[j].Cluster
	}
	j := slices.IndexFunc(cfg.AuthInfos, func(a clientcmdv1.NamedAuthInfo) bool { return a.Name == ctx.AuthInfo })
	if ctx.AuthInfo == "" || j < 0 {
		return cluster, namedUser{}, fmt.Errorf("context %q names no user it has", cfg.CurrentContext)
	}
	return cluster, namedUser{ctx.AuthInfo, cfg.AuthInfos[j].AuthInfo}, nil
}

// absolute resolves a kubeconfig's relative path against its directory,
// as clientcmd does.
func absolute(p string) string {
	if p == "" || path.IsAbs(p) {
		return p
	}
	return path.Join(KubernetesDir, p)
}

// KubeletCertProblem says why cert cannot authenticate node's kubelet:
// expired or not yet valid, not issued by the cluster CA for client
// authentication, or issued for another node; "" when it can.
func KubeletCertProblem(cert *x509.Certificate, node string, cas *x509.CertPool, now time.Time) string {
	until := cert.NotAfter.UTC().Format("2006-01-02 15:04 MST")
	switch {
	case !now.Before(cert.NotAfter):
		return "expired " + until
	case now.Before(cert.NotBefore):
		return "not valid before " + cert.NotBefore.UTC().Format("2006-01-02 15:04 MST")
	case cert.Subject.CommonName != "system:node:"+node:
		return fmt.Sprintf("issued for %q, not system:node:%s", cert.Subject.CommonName, node)
	case !slices.Contains(cert.Subject.Organization, "system:nodes"):
		return "not in the group system:nodes"
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: cas, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return "not issued by the cluster CA (" + err.Error() + ")"
	}
	return ""
}

// PairPEM is a certificate and key as the kubelet's store keeps them in
// one file: the certificate blocks, then the key.
func PairPEM(certPEM, keyPEM []byte) []byte {
	var out []byte
	for rest := certPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			out = append(out, pem.EncodeToMemory(b)...)
		}
	}
	return append(out, keyPEM...)
}
