package etcdclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// Files on a kubeadm control-plane node the client is made from: the etcd
// CA the servers are verified against and the apiserver's etcd client
// certificate, which etcd grants everything (kubeadm runs etcd without
// auth, certificates are the access control).
const (
	NodeCA         = nodefacts.EtcdCACert
	NodeClientCert = nodefacts.PKIDir + "/apiserver-etcd-client.crt"
	NodeClientKey  = nodefacts.PKIDir + "/apiserver-etcd-client.key"
	// NodeServerCert is the certificate the member serves its clients.
	NodeServerCert = nodefacts.PKIDir + "/" + nodefacts.EtcdServerCert
	// LocalEndpoint is the member's client URL on the node's loopback,
	// where kubeadm's etcd always listens.
	LocalEndpoint = "https://127.0.0.1:2379"
)

// ThroughSSH returns a client of the etcd member on the node c is
// connected to, reached through the SSH connection (a tunnel to its
// loopback client port) with the credentials read from the node. Requests
// go to that one member: with quorum lost, its local answers (Status, a
// serializable read, a snapshot) still come back.
func ThroughSSH(ctx context.Context, c ssh.Executor) (*clientv3.Client, error) {
	var files [3][]byte
	for i, p := range []string{NodeCA, NodeClientCert, NodeClientKey} {
		data, err := c.Read(ctx, p)
		if err != nil {
			return nil, err
		}
		files[i] = data
	}
	pair, err := tls.X509KeyPair(files[1], files[2])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", NodeClientCert, err)
	}
	// An expired certificate fails every handshake, which gRPC retries
	// until the request's deadline and then reports as a timeout: say so
	// at once. etcd's serving certificate is judged by its file, which is
	// what it serves from (it reloads it at each handshake).
	expired := []string{}
	if leaf, err := x509.ParseCertificate(pair.Certificate[0]); err == nil && !leaf.NotAfter.After(time.Now()) {
		expired = append(expired, NodeClientCert+" expired "+leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if data, err := c.Read(ctx, NodeServerCert); err == nil {
		if cert, err := nodefacts.ParseCertPEM(data); err == nil && !cert.NotAfter.After(time.Now()) {
			expired = append(expired, NodeServerCert+" expired "+cert.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	if len(expired) > 0 {
		return nil, &ExpiredError{What: expired}
	}
	return New(ctx, []string{LocalEndpoint}, files[0], pair, c.DialContext)
}

// ExpiredError is a member that cannot be reached because a certificate
// of its TLS has expired.
type ExpiredError struct{ What []string }

func (e *ExpiredError) Error() string {
	return "etcd cannot be reached: " + strings.Join(e.What, ", ") + " (homelab up renews them over SSH)"
}
