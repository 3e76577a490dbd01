package etcdclient

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/ssh"

	"github.com/homelab-dev/homelab/roles/pki/pkitest"
)

// nodeFiles is a node's files as ThroughSSH reads them; any other use of
// the connection is counted.
type nodeFiles struct {
	ssh.Executor
	files map[string][]byte
	dials int
}

func (n *nodeFiles) Read(ctx context.Context, p string) ([]byte, error) {
	if d, ok := n.files[p]; ok {
		return d, nil
	}
	return nil, &fs.PathError{Op: "read", Path: p, Err: fs.ErrNotExist}
}

func (n *nodeFiles) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	n.dials++
	return nil, errors.New("no services here")
}

// An expired client certificate, or an expired serving certificate file,
// is said at once, naming it, instead of a request timing out on
// handshakes that cannot succeed; valid ones make a client.
func TestThroughSSHSaysWhatExpired(t *testing.T) {
	c := pkitest.NewCA(t, "etcd-ca")
	now := time.Now()
	for _, tc := range []struct {
		name           string
		client, server time.Time
		says           []string // nil: a client is made
	}{
		{"both valid", now.Add(time.Hour), now.Add(time.Hour), nil},
		{"the client certificate expired", now.Add(-time.Minute), now.Add(time.Hour), []string{NodeClientCert}},
		{"etcd's serving certificate expired", now.Add(time.Hour), now.Add(-time.Minute), []string{NodeServerCert}},
		{"both", now.Add(-time.Minute), now.Add(-time.Minute), []string{NodeClientCert, NodeServerCert}},
	} {
		crt, key := c.Issue(t, pkitest.Leaf{CN: "kube-apiserver-etcd-client", NotAfter: tc.client})
		srv, _ := c.Issue(t, pkitest.Leaf{CN: "cp-1", NotAfter: tc.server})
		n := &nodeFiles{files: map[string][]byte{NodeCA: c.PEM, NodeClientCert: crt, NodeClientKey: key, NodeServerCert: srv}}
		cli, err := ThroughSSH(context.Background(), n)
		if tc.says == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			} else {
				cli.Close()
			}
			continue
		}
		var exp *ExpiredError
		if !errors.As(err, &exp) {
			t.Errorf("%s: %v, want an ExpiredError", tc.name, err)
			continue
		}
		for _, s := range tc.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not name %s", tc.name, err, s)
			}
		}
		if len(exp.What) != len(tc.says) || n.dials > 0 {
			t.Errorf("%s: %v, %d dials", tc.name, exp.What, n.dials)
		}
	}
}
