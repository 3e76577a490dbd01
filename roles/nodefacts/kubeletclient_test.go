package nodefacts

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/roles/pki/pkitest"
)

// testCA issues kubelet client certificates as the cluster's signer does.
type testCA struct {
	*pkitest.CA
	t testing.TB
}

func newTestCA(t *testing.T, cn string) *testCA { return &testCA{pkitest.NewCA(t, cn), t} }

// client issues a certificate for cn in org, valid from notBefore to
// notAfter, and returns it with its key (PEM).
func (ca *testCA) client(cn, org string, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	return ca.Issue(ca.t, pkitest.Leaf{CN: cn, Orgs: []string{org}, NotBefore: notBefore, NotAfter: notAfter,
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

func TestKubeletCertProblem(t *testing.T) {
	ca, other := newTestCA(t, "kubernetes"), newTestCA(t, "another cluster")
	now := time.Now()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	for _, tc := range []struct {
		name   string
		issuer *testCA
		cn, o  string
		from   time.Time
		until  time.Time
		word   string // "" for none
	}{
		{"the node's", ca, "system:node:gpu-1", "system:nodes", now.Add(-time.Hour), now.Add(time.Hour), ""},
		{"expired", ca, "system:node:gpu-1", "system:nodes", now.Add(-2 * time.Hour), now.Add(-time.Hour), "expired"},
		{"not yet valid", ca, "system:node:gpu-1", "system:nodes", now.Add(time.Hour), now.Add(2 * time.Hour), "not valid before"},
		{"another node's", ca, "system:node:gpu-2", "system:nodes", now.Add(-time.Hour), now.Add(time.Hour), "system:node:gpu-2"},
		{"not a node", ca, "system:node:gpu-1", "system:masters", now.Add(-time.Hour), now.Add(time.Hour), "system:nodes"},
		{"another CA's", other, "system:node:gpu-1", "system:nodes", now.Add(-time.Hour), now.Add(time.Hour), "cluster CA"},
	} {
		certPEM, _ := tc.issuer.client(tc.cn, tc.o, tc.from, tc.until)
		c, err := ParseCertPEM(certPEM)
		if err != nil {
			t.Fatal(err)
		}
		got := KubeletCertProblem(c, "gpu-1", pool, now)
		if (tc.word == "") != (got == "") || !strings.Contains(got, tc.word) {
			t.Errorf("%s: %q, want a problem naming %q", tc.name, got, tc.word)
		}
	}
}
