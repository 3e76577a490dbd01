package servingcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/homelab-dev/homelab/roles/pki/pkitest"
)

var node = Node{Name: "gpu-1", Address: "10.77.0.131"}

type request struct {
	cn     string
	orgs   []string
	dns    []string
	ips    []string
	emails []string
}

func (r request) pem(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: r.cn, Organization: r.orgs}, DNSNames: r.dns, EmailAddresses: r.emails}
	for _, ip := range r.ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// kubelets is what a kubelet's certificate manager asks for: the node's
// identity, its hostname address and its node IP.
var kubelets = request{cn: "system:node:gpu-1", orgs: []string{"system:nodes"}, dns: []string{"gpu-1"}, ips: []string{"10.77.0.131"}}

func csrOf(t *testing.T, r request, edit func(*certificatesv1.CertificateSigningRequestSpec)) certificatesv1.CertificateSigningRequest {
	spec := certificatesv1.CertificateSigningRequestSpec{
		Request:    r.pem(t),
		SignerName: certificatesv1.KubeletServingSignerName,
		Username:   "system:node:gpu-1",
		Groups:     []string{"system:nodes", "system:authenticated"},
		Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
	}
	if edit != nil {
		edit(&spec)
	}
	return certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "csr-x"}, Spec: spec}
}

func TestCheck(t *testing.T) {
	with := func(f func(*request)) request {
		r := kubelets
		f(&r)
		return r
	}
	cases := []struct {
		name string
		req  request
		edit func(*certificatesv1.CertificateSigningRequestSpec)
		// want are fragments of the reasons, one per reason expected;
		// none means approvable.
		want []string
	}{
		{name: "the kubelet's own request", req: kubelets},
		{name: "name in another case", req: with(func(r *request) { r.dns = []string{"GPU-1"} })},
		{name: "RSA usages", req: kubelets, edit: func(s *certificatesv1.CertificateSigningRequestSpec) {
			s.Usages = append(s.Usages, certificatesv1.UsageKeyEncipherment)
		}},
		{name: "another node's address", req: with(func(r *request) { r.ips = []string{"10.77.0.131", "10.77.0.100"} }), want: []string{"10.77.0.100"}},
		{name: "an old address only (re-addressed)", req: with(func(r *request) { r.ips = []string{"10.77.0.120"} }), want: []string{"10.77.0.120", "no IP address 10.77.0.131"}},
		{name: "the API's name", req: with(func(r *request) { r.dns = []string{"gpu-1", "kubernetes.default.svc"} }), want: []string{"kubernetes.default.svc"}},
		{name: "another node's CN", req: with(func(r *request) { r.cn = "system:node:cp-1" }), want: []string{"system:node:cp-1"}},
		{name: "masters group", req: with(func(r *request) { r.orgs = []string{"system:masters"} }), want: []string{"subject O"}},
		{name: "e-mail", req: with(func(r *request) { r.emails = []string{"a@b"} }), want: []string{"e-mail"}},
		{name: "asked by another node", req: kubelets, edit: func(s *certificatesv1.CertificateSigningRequestSpec) { s.Username = "system:node:cp-1" }, want: []string{"asked by"}},
		{name: "not in the nodes group", req: kubelets, edit: func(s *certificatesv1.CertificateSigningRequestSpec) { s.Groups = []string{"system:authenticated"} }, want: []string{"group"}},
		{name: "client usage", req: kubelets, edit: func(s *certificatesv1.CertificateSigningRequestSpec) {
			s.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
		}, want: []string{"client auth", "lack"}},
		{name: "another signer", req: kubelets, edit: func(s *certificatesv1.CertificateSigningRequestSpec) {
			s.SignerName = certificatesv1.KubeAPIServerClientSignerName
		}, want: []string{"signer"}},
		{name: "garbage", req: kubelets, edit: func(s *certificatesv1.CertificateSigningRequestSpec) { s.Request = []byte("x") }, want: []string{"not a PEM"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Check(csrOf(t, c.req, c.edit), node)
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("approved")
			}
			reasons := strings.Split(err.Error(), "\n")
			if len(reasons) != len(c.want) {
				t.Errorf("%d reasons, want %d: %q", len(reasons), len(c.want), reasons)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("no reason mentions %q: %v", w, err)
				}
			}
		})
	}
}

func TestPendingAndOwner(t *testing.T) {
	csr := csrOf(t, kubelets, nil)
	if !Pending(csr) || !IsServingRequestOf(csr, node) {
		t.Fatal("a fresh request of gpu-1's kubelet is pending and gpu-1's")
	}
	if IsServingRequestOf(csr, Node{Name: "gpu-2"}) {
		t.Error("gpu-1's request taken for gpu-2's")
	}
	for _, c := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed} {
		decided := csr
		decided.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: c}}
		if Pending(decided) {
			t.Errorf("%s still pending", c)
		}
	}
}

func TestCheckCertificate(t *testing.T) {
	ca, other := pkitest.NewCA(t, "kubernetes"), pkitest.NewCA(t, "kubernetes")
	now := time.Now()
	leaf := pkitest.Leaf{CN: "system:node:gpu-1", Orgs: []string{"system:nodes"}, DNS: []string{"gpu-1"}, IPs: []net.IP{net.ParseIP("10.77.0.131")},
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	parse := func(t *testing.T, by *pkitest.CA, l pkitest.Leaf) *x509.Certificate {
		certPEM, keyPEM := by.Issue(t, l)
		c, err := ParseCertificate(append(certPEM, keyPEM...))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if err := CheckCertificate(parse(t, ca, leaf), ca.Pool(), node, now); err != nil {
		t.Fatalf("the kubelet's approved certificate refused: %v", err)
	}
	selfSigned := leaf
	selfSigned.CN = "gpu-1@1700000000"
	stale := leaf
	stale.IPs = []net.IP{net.ParseIP("10.77.0.120")}
	expired := leaf
	expired.NotAfter = now.Add(-time.Minute)
	client := leaf
	client.Usages = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	for name, c := range map[string]struct {
		cert *x509.Certificate
		want string
	}{
		"another CA's":              {parse(t, other, leaf), "cluster CA"},
		"the kubelet's self-signed": {parse(t, other, selfSigned), "subject CN"},
		"for the old address":       {parse(t, ca, stale), "10.77.0.120"},
		"expired":                   {parse(t, ca, expired), "valid now"},
		"a client certificate":      {parse(t, ca, client), "cluster CA"},
	} {
		if err := CheckCertificate(c.cert, ca.Pool(), node, now); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a reason naming %q", name, err, c.want)
		}
	}
	if _, err := ParseCertificate([]byte("-----BEGIN EC PRIVATE KEY-----\nAA==\n-----END EC PRIVATE KEY-----\n")); err == nil {
		t.Error("a key alone parsed as a certificate")
	}
}
