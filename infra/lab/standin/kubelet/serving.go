package kubelet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"
)

// servingCert returns the kubelet's serving certificate source, as the
// kubelet's own: with serverTLSBootstrap, a certificate manager that asks
// the cluster CA for one through a kubernetes.io/kubelet-serving CSR (for
// the node's name and node IP) and keeps it as kubelet-server-current.pem,
// none until the CSR is approved, so TLS handshakes fail until then;
// without, a self-signed pair kubelet.crt/kubelet.key made once in the
// certificate directory.
func servingCert(ctx context.Context, c Config, cfg *rest.Config) (func() (*tls.Certificate, error), error) {
	if !c.ServerTLSBootstrap {
		pair, err := selfSigned(c)
		if err != nil {
			return nil, err
		}
		return func() (*tls.Certificate, error) { return &pair, nil }, nil
	}
	store, err := certificate.NewFileStore("kubelet-server", c.PKIDir, c.PKIDir, "", "")
	if err != nil {
		return nil, err
	}
	tmpl := &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: "system:node:" + c.NodeName, Organization: []string{"system:nodes"}},
		DNSNames: []string{c.NodeName},
	}
	if ip := net.ParseIP(c.NodeIP); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	}
	mgr, err := certificate.NewManager(&certificate.Config{
		ClientsetFn:      func(*tls.Certificate) (kubernetes.Interface, error) { return kubernetes.NewForConfig(cfg) },
		Template:         tmpl,
		GetUsages:        certificate.DefaultKubeletServingGetUsages,
		SignerName:       certificatesv1.KubeletServingSignerName,
		CertificateStore: store,
		Name:             "kubelet-server",
		Ctx:              &ctx,
	})
	if err != nil {
		return nil, err
	}
	mgr.Start()
	go func() {
		<-ctx.Done()
		mgr.Stop()
	}()
	return func() (*tls.Certificate, error) {
		if cur := mgr.Current(); cur != nil {
			return cur, nil
		}
		return nil, errors.New("no serving certificate available for the kubelet")
	}, nil
}

// selfSigned is the pair the kubelet makes for itself when nothing gives
// it one.
func selfSigned(c Config) (tls.Certificate, error) {
	crt, key := filepath.Join(c.PKIDir, "kubelet.crt"), filepath.Join(c.PKIDir, "kubelet.key")
	if pair, err := tls.LoadX509KeyPair(crt, key); err == nil {
		return pair, nil
	}
	var ips []net.IP
	if ip := net.ParseIP(c.NodeIP); ip != nil {
		ips = append(ips, ip)
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(c.NodeName, ips, nil)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := os.MkdirAll(c.PKIDir, 0o755); err != nil {
		return tls.Certificate{}, err
	}
	if err := certutil.WriteCert(crt, certPEM); err != nil {
		return tls.Certificate{}, err
	}
	if err := os.WriteFile(key, keyPEM, 0o600); err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// serveKubeletAPI answers on the kubelet's port with its serving
// certificate. Only /healthz, and only to a client with a certificate of
// the configured client CA (the API server's kubelet client): kubeadm's
// kubelet allows no anonymous request. The stand-in has no logs, exec or
// metrics to give: every other path is 501.
func serveKubeletAPI(ctx context.Context, addr, clientCAFile string, cert func() (*tls.Certificate, error), logf func(string, ...any)) {
	base := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert() },
		ClientAuth:     tls.VerifyClientCertIfGiven,
	}
	// The client CA is read at every handshake, as the kubelet's dynamic
	// CA file is: at first boot it is not there yet.
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := base.Clone()
		c.GetConfigForClient = nil
		c.ClientCAs = x509.NewCertPool()
		if b, err := os.ReadFile(clientCAFile); err == nil {
			c.ClientCAs.AppendCertsFromPEM(b)
		}
		return c, nil
	}
	srv := &http.Server{
		Addr:      addr,
		TLSConfig: base,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
			if r.URL.Path != "/healthz" {
				http.Error(w, "the kubelet stand-in serves no "+r.URL.Path, http.StatusNotImplemented)
				return
			}
			fmt.Fprint(w, "ok")
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	for ctx.Err() == nil {
		err := srv.ListenAndServeTLS("", "")
		if ctx.Err() != nil || errors.Is(err, http.ErrServerClosed) {
			return
		}
		// The port may still be held by the kubelet being replaced.
		logf("kubelet API on %s: %v (retrying)", addr, err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func kubeletAPIAddress(address string, port int32) string {
	if address == "" {
		address = "0.0.0.0"
	}
	if port == 0 {
		port = 10250
	}
	return net.JoinHostPort(address, strconv.Itoa(int(port)))
}
