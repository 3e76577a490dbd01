package nodefacts

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/netip"
	"slices"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/sans"
)

// ServingCert is a certificate of a control-plane node whose SANs must
// equal a required set: `kubeadm certs renew` keeps whatever SANs a
// certificate has (kubeadm #1447), so a wrong one is reissued by its phase.
type ServingCert struct {
	// File is relative to PKIDir.
	File string
	// Phase is its `kubeadm init phase certs` name.
	Phase string
	// Etcd: etcd's SANs are required, not the apiserver's.
	Etcd bool
	// Server is the static pod that serves it at Port on the node's
	// address, reading it from the file (reloaded by itself: see
	// Renewable.RestartPod). The apiserver's Port is 0: it listens on the
	// inventory's cluster.endpoint.port (kubeadm's bindPort), ServedPort.
	Server string
	Port   int
	// Flag is Server's flag that names the file in its manifest.
	Flag string
}

// etcd's ports on every control-plane node (kubeadm's
// EtcdListenClientPort and EtcdListenPeerPort).
const (
	EtcdClientPort = 2379
	EtcdPeerPort   = 2380
)

// ServedPort is the port the certificate is served at, given the
// apiserver's.
func (c ServingCert) ServedPort(apiPort int) int {
	if c.Port == 0 {
		return apiPort
	}
	return c.Port
}

// The serving certificates whose SANs are checked, by file.
const (
	APIServerCert  = "apiserver.crt"
	EtcdServerCert = "etcd/server.crt"
	EtcdPeerCert   = "etcd/peer.crt"
)

// ServingCerts are checked in this order.
var ServingCerts = []ServingCert{
	{File: APIServerCert, Phase: "apiserver", Server: KubeAPIServer, Flag: "tls-cert-file"},
	{File: EtcdServerCert, Phase: "etcd-server", Etcd: true, Server: Etcd, Port: EtcdClientPort, Flag: "cert-file"},
	{File: EtcdPeerCert, Phase: "etcd-peer", Etcd: true, Server: Etcd, Port: EtcdPeerPort, Flag: "peer-cert-file"},
}

// ServingCertOf returns the serving certificate of that file.
func ServingCertOf(file string) (ServingCert, bool) {
	for _, c := range ServingCerts {
		if c.File == file {
			return c, true
		}
	}
	return ServingCert{}, false
}

// etcdImplicitSANs are what kubeadm adds to etcd's certificates whatever
// the config asks: the IPv6 loopback (next to localhost and 127.0.0.1,
// which roles/sans asks for anyway).
var etcdImplicitSANs = []string{"::1"}

// AllowedExtras are the SANs a certificate may carry beyond the required
// set without being wrong.
func (c ServingCert) AllowedExtras() []string {
	if c.Etcd {
		return slices.Clone(etcdImplicitSANs)
	}
	return nil
}

// Required is the set the certificate must carry, from the inventory.
func (c ServingCert) Required(inv *inventory.Inventory) []string {
	if c.Etcd {
		return sans.Etcd(inv).Strings()
	}
	return sans.APIServer(inv).Strings()
}

// ParseCertPEM reads the first certificate of a PEM file.
func ParseCertPEM(data []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}

// SANs lists a certificate's IP SANs, then its DNS SANs, in the
// certificate's order; IPv4-mapped IPv6 addresses are written as IPv4, as
// the required sets are. Never nil.
func SANs(c *x509.Certificate) []string {
	out := []string{}
	for _, ip := range c.IPAddresses {
		if a, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, a.Unmap().String())
		}
	}
	return append(out, c.DNSNames...)
}

// CompareSANs returns what have lacks of want (in want's order) and what
// it carries beyond want and allowed (in have's order). An IP is the same
// whatever way it is written (::ffff:10.0.0.1 is 10.0.0.1, 2001:DB8::1 is
// 2001:db8::1); DNS names are compared as written.
func CompareSANs(have, want, allowed []string) (missing, extra []string) {
	norm := func(list []string) map[string]bool {
		m := make(map[string]bool, len(list))
		for _, s := range list {
			m[normSAN(s)] = true
		}
		return m
	}
	h, w, a := norm(have), norm(want), norm(allowed)
	for _, s := range want {
		if !h[normSAN(s)] {
			missing = append(missing, s)
		}
	}
	for _, s := range have {
		if n := normSAN(s); !w[n] && !a[n] {
			extra = append(extra, s)
		}
	}
	return missing, extra
}

// SANsDiffer reports whether CompareSANs finds anything.
func SANsDiffer(have, want, allowed []string) bool {
	missing, extra := CompareSANs(have, want, allowed)
	return len(missing) > 0 || len(extra) > 0
}

func normSAN(s string) string {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().String()
	}
	return s
}
