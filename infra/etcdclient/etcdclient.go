// Package etcdclient opens etcd clients as every part of homelab needs
// them: the servers verified against the cluster's etcd CA, a client
// certificate, and connections made by the caller's dialer (an SSH tunnel
// to a member's loopback port, or the emulated homelab's gateway).
package etcdclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// DialFunc opens a connection to addr.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// New returns a client of endpoints (https://HOST:2379). It does not wait
// for a connection: the first request does.
func New(ctx context.Context, endpoints []string, caPEM []byte, cert tls.Certificate, dial DialFunc) (*clientv3.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("etcd CA: no certificate in PEM")
	}
	return clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 10 * time.Second,
		TLS:         &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dial(ctx, "tcp", addr)
		})},
		Context: ctx,
	})
}
