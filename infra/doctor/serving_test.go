package doctor

import (
	"net"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/pki/pkitest"
)

func TestServingVerdict(t *testing.T) {
	node := inventory.Node{Name: "gpu-1", Address: "10.0.0.131"}
	csr := func(name string, ips ...string) certificatesv1.CertificateSigningRequest {
		l := pkitest.Leaf{CN: "system:node:gpu-1", Orgs: []string{"system:nodes"}, DNS: []string{"gpu-1"}}
		for _, ip := range ips {
			l.IPs = append(l.IPs, net.ParseIP(ip))
		}
		return certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: pkitest.Request(t, l), SignerName: certificatesv1.KubeletServingSignerName,
			Username: "system:node:gpu-1", Groups: []string{"system:nodes"},
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		}}
	}
	for _, c := range []struct {
		name    string
		pending []certificatesv1.CertificateSigningRequest
		want    Status
		names   []string
	}{
		{"nothing waiting", nil, OK, nil},
		{"a renewal", []certificatesv1.CertificateSigningRequest{csr("csr-r", "10.0.0.131")}, Warn, []string{"csr-r", "homelab up"}},
		{"a foreign address", []certificatesv1.CertificateSigningRequest{csr("csr-r", "10.0.0.131"), csr("csr-x", "10.0.0.100")}, Fail, []string{"csr-x", "10.0.0.100"}},
	} {
		st, detail := servingVerdict(node, c.pending)
		if st != c.want {
			t.Errorf("%s: %v (%s), want %v", c.name, st, detail, c.want)
		}
		for _, n := range c.names {
			if !strings.Contains(detail, n) {
				t.Errorf("%s: %q does not name %q", c.name, detail, n)
			}
		}
	}
}
