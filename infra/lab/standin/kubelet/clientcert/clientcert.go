// Package clientcert gives the kubelet stand-in its API credentials the way
// the kubelet gets them: an existing kubeconfig, or a TLS bootstrap through a
// bootstrap kubeconfig, and, when rotation is on, a client certificate kept
// in PKIDIR/kubelet-client-current.pem that is renewed through CSRs.
package clientcert

import (
	"context"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/client-go/util/keyutil"
)

// Options says where the credentials live.
type Options struct {
	NodeName                string
	KubeconfigPath          string
	BootstrapKubeconfigPath string
	CertDir                 string // the kubelet's --cert-dir, /var/lib/kubelet/pki
	Rotate                  bool   // rotateCertificates of the KubeletConfiguration
	// RetryInterval is the pause between attempts while the API is not
	// there yet (default 1 s).
	RetryInterval time.Duration
	Logf          func(format string, args ...any)
}

const (
	pairPrefix = "kubelet-client"
	signerName = certificatesv1.KubeAPIServerClientKubeletSignerName
)

var usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}

// Load returns a client config for the node's credentials, as the kubelet's
// bootstrap.LoadClientConfig finds them: the kubeconfig while it loads (the
// certificate files it names readable) and its certificate has not
// expired, else a TLS bootstrap through the bootstrap kubeconfig. It keeps
// trying while the bootstrap does not get through: at kubeadm init the
// kubelet starts before the API server it is going to run. It fails, as
// the kubelet does at start (systemd then restarts it), when the kubeconfig
// cannot be used and there is no bootstrap kubeconfig to get another; with
// no bootstrap kubeconfig given at all, an expired certificate is used as
// it is.
func Load(ctx context.Context, o Options) (*rest.Config, error) {
	if o.RetryInterval <= 0 {
		o.RetryInterval = time.Second
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	var last string
	report := func(err error) {
		if msg := err.Error(); msg != last {
			last = msg
			o.Logf("credentials: %v (retrying every %s)", err, o.RetryInterval)
		}
	}
	use := func(cfg *rest.Config) (*rest.Config, error) {
		if o.Rotate && (len(cfg.CertData) > 0 || cfg.CertFile != "") {
			return rotating(ctx, cfg, o)
		}
		return cfg, nil
	}
	for {
		cfg, err := loadValid(o.KubeconfigPath)
		if err == nil {
			return use(cfg)
		}
		if o.BootstrapKubeconfigPath == "" {
			cfg, _, err := load(o.KubeconfigPath)
			if err != nil {
				return nil, fmt.Errorf("unable to load kubeconfig: %w", err)
			}
			return use(cfg)
		}
		if _, statErr := os.Stat(o.BootstrapKubeconfigPath); statErr != nil {
			return nil, fmt.Errorf("%v, and unable to load bootstrap kubeconfig: %w", err, statErr)
		}
		if err := bootstrap(ctx, o); err != nil {
			report(fmt.Errorf("TLS bootstrap: %w", err))
		} else {
			o.Logf("credentials: TLS bootstrap done, wrote %s", o.KubeconfigPath)
			continue
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(o.RetryInterval):
		}
	}
}

// loadValid loads a kubeconfig whose client certificate, if any, has not
// expired.
func loadValid(path string) (*rest.Config, error) {
	cfg, leaf, err := load(path)
	if err != nil {
		return nil, err
	}
	if leaf != nil && time.Now().After(leaf.NotAfter) {
		return nil, fmt.Errorf("%s: client certificate expired %s", path, leaf.NotAfter.Format(time.RFC3339))
	}
	return cfg, nil
}

// load loads a kubeconfig, the certificate and key it embeds or names
// (files that must be there) included, and returns its client
// certificate (nil when it has none).
func load(path string) (*rest.Config, *x509.Certificate, error) {
	if path == "" {
		return nil, nil, errors.New("no --kubeconfig")
	}
	if _, err := os.Stat(path); err != nil {
		return nil, nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, nil, err
	}
	certPEM, keyPEM := cfg.CertData, cfg.KeyData
	if len(certPEM) == 0 && cfg.CertFile != "" {
		if certPEM, err = os.ReadFile(cfg.CertFile); err != nil {
			return nil, nil, err
		}
		if keyPEM, err = os.ReadFile(cfg.KeyFile); err != nil {
			return nil, nil, err
		}
	}
	if len(certPEM) == 0 {
		return cfg, nil, nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, leaf, nil
}

// bootstrap does what the kubelet's TLS bootstrap does: request a client
// certificate with the bootstrap token, store it as kubelet-client-TS.pem plus
// the -current link, and write a kubeconfig that points at that link.
func bootstrap(ctx context.Context, o Options) error {
	bcfg, err := clientcmd.BuildConfigFromFlags("", o.BootstrapKubeconfigPath)
	if err != nil {
		return err
	}
	store, err := certificate.NewFileStore(pairPrefix, o.CertDir, o.CertDir, "", "")
	if err != nil {
		return err
	}
	// A certificate from an earlier run that got no further than this.
	if cur, err := store.Current(); err == nil && cur.Leaf != nil && time.Now().Before(cur.Leaf.NotAfter) {
		return writeKubeconfig(o.KubeconfigPath, bcfg, store.CurrentPath())
	}

	// The key survives failed attempts so that a retry finds its earlier CSR
	// (same name) instead of piling up new ones.
	keyFile := filepath.Join(o.CertDir, pairPrefix+".key.tmp")
	if err := os.MkdirAll(o.CertDir, 0o755); err != nil {
		return err
	}
	keyPEM, _, err := keyutil.LoadOrGenerateKeyFile(keyFile)
	if err != nil {
		return err
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return err
	}
	subject := subject(o.NodeName)
	csrPEM, err := certutil.MakeCSR(key, &subject, nil, nil)
	if err != nil {
		return err
	}
	bcfg.Timeout = 30 * time.Second
	client, err := kubernetes.NewForConfig(bcfg)
	if err != nil {
		return err
	}
	name := csrName(keyPEM, subject)
	reqName, reqUID, err := csr.RequestCertificateWithContext(ctx, client, csrPEM, name, signerName, nil, usages, key)
	if err != nil {
		return err
	}
	o.Logf("credentials: requested certificate %s for %s, waiting for approval", reqName, subject.CommonName)
	wctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	certPEM, err := csr.WaitForCertificate(wctx, client, reqName, reqUID)
	if err != nil {
		return err
	}
	if _, err := store.Update(certPEM, keyPEM); err != nil {
		return err
	}
	if err := writeKubeconfig(o.KubeconfigPath, bcfg, store.CurrentPath()); err != nil {
		return err
	}
	_ = os.Remove(keyFile)
	return nil
}

func subject(node string) pkix.Name {
	return pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}
}

// csrName is stable for a key and subject, as the kubelet's own is.
func csrName(keyPEM []byte, s pkix.Name) string {
	h := sha512.New512_256()
	h.Write(keyPEM)
	fmt.Fprintf(h, "|%s|%s|", s.CommonName, strings.Join(s.Organization, ","))
	for _, u := range usages {
		fmt.Fprintf(h, "%s|", u)
	}
	return "node-csr-" + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// writeKubeconfig writes the kubeconfig the kubelet writes after bootstrap:
// the bootstrap kubeconfig's cluster, the certificate pair file as user.
func writeKubeconfig(path string, bcfg *rest.Config, pairFile string) error {
	kc := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"default-cluster": {
			Server:                   bcfg.Host,
			InsecureSkipTLSVerify:    bcfg.Insecure,
			CertificateAuthority:     bcfg.CAFile,
			CertificateAuthorityData: bcfg.CAData,
		}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{"default-auth": {
			ClientCertificate: pairFile,
			ClientKey:         pairFile,
		}},
		Contexts: map[string]*clientcmdapi.Context{"default-context": {
			Cluster:   "default-cluster",
			AuthInfo:  "default-auth",
			Namespace: "default",
		}},
		CurrentContext: "default-context",
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(kc, path)
}

// rotating starts a certificate manager for the client certificate and
// returns a config whose connections always present its current
// certificate. Starting from a kubeconfig with embedded certificate data (what
// kubeadm init writes), the manager stores that certificate as
// kubelet-client-current.pem at once and requests a fresh one; kubeadm's
// kubelet-finalize phase looks for that file.
func rotating(ctx context.Context, cfg *rest.Config, o Options) (*rest.Config, error) {
	store, err := certificate.NewFileStore(pairPrefix, o.CertDir, o.CertDir, cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return nil, err
	}
	base := rest.AnonymousClientConfig(cfg)
	tlsCfg, err := rest.TLSConfigFor(base)
	if err != nil {
		return nil, err
	}
	if tlsCfg == nil {
		// Plain HTTP: there is no client certificate to present.
		return cfg, nil
	}
	subject := subject(o.NodeName)
	mgr, err := certificate.NewManager(&certificate.Config{
		ClientsetFn: func(current *tls.Certificate) (kubernetes.Interface, error) {
			if current == nil {
				return kubernetes.NewForConfig(cfg)
			}
			c, _ := withCert(base, tlsCfg, func() *tls.Certificate { return current })
			return kubernetes.NewForConfig(c)
		},
		Template:                &x509.CertificateRequest{Subject: subject},
		Usages:                  usages,
		SignerName:              signerName,
		CertificateStore:        store,
		BootstrapCertificatePEM: cfg.CertData,
		BootstrapKeyPEM:         cfg.KeyData,
		Name:                    "kubelet-client",
		Ctx:                     &ctx,
	})
	if err != nil {
		return nil, err
	}
	mgr.Start()
	c, dialer := withCert(base, tlsCfg, mgr.Current)
	go func() {
		// Connections made with a replaced certificate would go on using it.
		last := mgr.Current()
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if cur := mgr.Current(); cur != last {
				last = cur
				o.Logf("credentials: client certificate rotated, reconnecting")
				dialer.CloseAll()
			}
		}
	}()
	return c, nil
}

func withCert(base *rest.Config, tlsCfg *tls.Config, current func() *tls.Certificate) (*rest.Config, *connrotation.Dialer) {
	t := tlsCfg.Clone()
	t.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if c := current(); c != nil {
			return c, nil
		}
		return &tls.Certificate{}, nil
	}
	dialer := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	c := rest.CopyConfig(base)
	c.TLSClientConfig = rest.TLSClientConfig{}
	c.Dial = nil
	c.Transport = utilnet.SetTransportDefaults(&http.Transport{
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     t,
		MaxIdleConnsPerHost: 25,
		DialContext:         dialer.DialContext,
	})
	return c, dialer
}
