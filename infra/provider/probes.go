package provider

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/homelab-dev/homelab/infra/apiprobe"
	"github.com/homelab-dev/homelab/infra/ssh"
)

// probes is how a step asks a control-plane node's components whether
// they serve, through the node's SSH connection. Steps take them from their
// Config as they take their dialer, so that unit tests, whose fake nodes run no
// etcd or apiserver, hand them probes that answer for those nodes.
type probes struct {
	// etcd: is the node's etcd member healthy with a leader.
	etcd func(ctx context.Context, c ssh.Executor) error
	// readyz: does the apiserver at addr answer /readyz with a certificate
	// r.CA signed for r.ServerName (or addr's host).
	readyz func(ctx context.Context, c ssh.Executor, r apiprobe.Readyz, addr string) error
	// served: the leaf certificate served at addr.
	served func(ctx context.Context, c ssh.Executor, addr string) (*x509.Certificate, error)
	// healthz: does a component answer 200 at addr/path over HTTPS.
	healthz func(ctx context.Context, c ssh.Executor, endpoint string) error
	// poll is the pause between two rounds; timeout how long a node may
	// take to be healthy after a change.
	poll, timeout time.Duration
	// network is how long a node new to a running cluster may take to
	// have its pod network (its Cilium agent pulled, started and
	// writing the CNI configuration), as Dataplane allows on a build.
	network time.Duration
	// reloadGrace is how long a component may take to reload a
	// certificate file by itself before it is restarted: the apiserver
	// watches its files and re-reads them at least once a minute.
	reloadGrace time.Duration
}

var realProbes = probes{
	etcd: etcdHealthy,
	readyz: func(ctx context.Context, c ssh.Executor, r apiprobe.Readyz, addr string) error {
		r.Dial = c.DialContext
		return r.Check(ctx, addr)
	},
	served: func(ctx context.Context, c ssh.Executor, addr string) (*x509.Certificate, error) {
		return apiprobe.ServedCertificate(ctx, c.DialContext, addr)
	},
	healthz:     componentHealthz,
	poll:        2 * time.Second,
	timeout:     4 * time.Minute,
	network:     5 * time.Minute,
	reloadGrace: 75 * time.Second,
}

// componentHealthz asks a controller-manager's or scheduler's health
// endpoint (host:port/path). Their serving certificates are self-signed
// in memory at each start: nothing to verify them against, and the
// question is only whether the restarted process runs.
func componentHealthz(ctx context.Context, c ssh.Executor, endpoint string) error {
	addr, path, _ := strings.Cut(endpoint, "/")
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return c.DialContext(ctx, network, addr)
	}
	if err := apiprobe.Healthz(ctx, dial, addr, "/"+path); err != nil {
		return fmt.Errorf("%s: %w", endpoint, err)
	}
	return nil
}
