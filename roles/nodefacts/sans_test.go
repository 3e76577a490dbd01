package nodefacts

import (
	"crypto/x509"
	"net"
	"slices"
	"testing"

	"github.com/homelab-dev/homelab/inventory"
)

func TestCompareSANs(t *testing.T) {
	want := []string{"10.0.0.140", "cp-1", "2001:db8::1"}
	for _, tc := range []struct {
		name           string
		have, allowed  []string
		missing, extra []string
	}{
		{"exactly the set, in another order", []string{"cp-1", "2001:db8::1", "10.0.0.140"}, nil, nil, nil},
		{"the seed's moved node: old address, new one missing", []string{"10.0.0.120", "cp-1", "2001:db8::1"}, nil, []string{"10.0.0.140"}, []string{"10.0.0.120"}},
		{"a stale extra", []string{"10.0.0.140", "cp-1", "2001:db8::1", "10.0.0.99"}, nil, nil, []string{"10.0.0.99"}},
		{"an allowed extra (kubeadm's ::1 on etcd)", []string{"10.0.0.140", "cp-1", "2001:db8::1", "::1"}, []string{"::1"}, nil, nil},
		{"an allowed extra written otherwise", []string{"10.0.0.140", "cp-1", "2001:db8::1", "0:0:0:0:0:0:0:1"}, []string{"::1"}, nil, nil},
		{"IPs compare as addresses: mapped IPv4, upper-case IPv6", []string{"::ffff:10.0.0.140", "cp-1", "2001:DB8:0::1"}, nil, nil, nil},
		{"DNS names compare as written", []string{"10.0.0.140", "CP-1", "2001:db8::1"}, nil, []string{"cp-1"}, []string{"CP-1"}},
		{"a name is not an address", []string{"10.0.0.140.nip.io", "cp-1", "2001:db8::1"}, nil, []string{"10.0.0.140"}, []string{"10.0.0.140.nip.io"}},
		{"no certificate", nil, nil, want, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			missing, extra := CompareSANs(tc.have, want, tc.allowed)
			if !slices.Equal(missing, tc.missing) || !slices.Equal(extra, tc.extra) {
				t.Errorf("missing %v extra %v, want %v %v", missing, extra, tc.missing, tc.extra)
			}
			if SANsDiffer(tc.have, want, tc.allowed) != (len(tc.missing)+len(tc.extra) > 0) {
				t.Error("SANsDiffer disagrees with CompareSANs")
			}
		})
	}
}

func TestSANs(t *testing.T) {
	// net.ParseIP gives IPv4 in its 16-byte form: written as IPv4.
	c, err := ParseCertPEM(certPEM(t, []string{"cp-1", "kubernetes"}, net.ParseIP("10.0.0.140"), net.ParseIP("2001:DB8::1"), net.IPv4(127, 0, 0, 1).To4()))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := SANs(c), []string{"10.0.0.140", "2001:db8::1", "127.0.0.1", "cp-1", "kubernetes"}; !slices.Equal(got, want) {
		t.Errorf("SANs %v, want %v", got, want)
	}
	if got := SANs(&x509.Certificate{}); got == nil || len(got) != 0 {
		t.Errorf("a certificate without SANs: %#v, want an empty list", got)
	}
	if _, err := ParseCertPEM([]byte("not PEM")); err == nil {
		t.Error("garbage parsed as a certificate")
	}
}

func TestServingCerts(t *testing.T) {
	inv := &inventory.Inventory{
		Cluster: inventory.Cluster{
			Endpoint: inventory.Endpoint{Layout: inventory.LayoutVIP, VIP: "10.0.0.100", Port: 6443},
			Network:  inventory.Network{NodeCIDR: "10.0.0.0/24", ServiceCIDR: "10.96.0.0/12", DNSDomain: "cluster.local"},
		},
		Nodes: []inventory.Node{{Name: "cp-1", Role: inventory.RoleControlPlane, Address: "10.0.0.120"}},
	}
	api, _ := ServingCertOf(APIServerCert)
	etcd, _ := ServingCertOf(EtcdPeerCert)
	if !slices.Contains(api.Required(inv), "10.0.0.100") || slices.Contains(etcd.Required(inv), "10.0.0.100") {
		t.Errorf("the VIP belongs to the apiserver's set only: api %v etcd %v", api.Required(inv), etcd.Required(inv))
	}
	if api.AllowedExtras() != nil || !slices.Equal(etcd.AllowedExtras(), []string{"::1"}) {
		t.Errorf("allowed extras: api %v etcd %v", api.AllowedExtras(), etcd.AllowedExtras())
	}
	// Where each is served: the apiserver on the declared port, etcd on
	// kubeadm's fixed ones.
	server, _ := ServingCertOf(EtcdServerCert)
	for _, c := range []struct {
		sc           ServingCert
		server       string
		port, wanted int
	}{{api, KubeAPIServer, 7443, 7443}, {server, Etcd, 7443, 2379}, {etcd, Etcd, 7443, 2380}} {
		if c.sc.Server != c.server || c.sc.ServedPort(c.port) != c.wanted {
			t.Errorf("%s: served by %s at %d, want %s at %d", c.sc.File, c.sc.Server, c.sc.ServedPort(c.port), c.server, c.wanted)
		}
	}
	if _, ok := ServingCertOf("front-proxy-client.crt"); ok {
		t.Error("a certificate whose SANs are not checked was found")
	}
}
