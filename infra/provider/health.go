package provider

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"strconv"
	"time"

	p "github.com/pulumi/pulumi-go-provider"

	"github.com/homelab-dev/homelab/infra/apiprobe"
	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// A control-plane node's health after a change (its apiserver, etcd
// member, controller-manager and scheduler answer, serving the
// certificates on disk): what ControlPlaneAddress, the upgrade and the
// revival each wait for before the next node.

// servedCert is a serving certificate re-issued on the node: a renewed
// file is not yet a renewed server, so the node counts as healthy only
// once its component serves the file's certificate at port.
type servedCert struct {
	file, port, pod string
}

// servedOf lists the serving certificates among re-issued files.
func servedOf(certs []string, apiPort int) []servedCert {
	var out []servedCert
	for _, f := range certs {
		if sc, ok := nodefacts.ServingCertOf(f); ok {
			out = append(out, servedCert{f, strconv.Itoa(sc.ServedPort(apiPort)), sc.Server})
		}
	}
	return out
}

// settle is what the node must show, beyond a healthy etcd member and
// apiserver, before the next node is touched.
type settle struct {
	served []servedCert
	// components are restarted static pods whose health endpoints must
	// answer.
	components []string
	// endpoint: the API must answer through the controlPlaneEndpoint too.
	endpoint bool
}

// waitHealthy waits for this node's etcd member and for its apiserver to
// serve /readyz with a certificate valid for the node's address, and for
// what s adds. The apiserver and etcd reload re-issued certificates by
// themselves, so they are not restarted, which would take the VIP away
// from its holder for keepalived's check interval; one that still serves
// an old certificate after the reload grace is restarted, once.
func waitHealthy(ctx context.Context, c ssh.Executor, in ControlPlaneAddressArgs, s settle) error {
	pr := configOf(ctx).probes
	caPEM, err := c.Read(ctx, nodefacts.CACert)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	files := map[string][]byte{}
	for _, sc := range s.served {
		data, err := c.Read(ctx, nodefacts.PKIFile(sc.file))
		if err != nil {
			return err
		}
		cert, err := nodefacts.ParseCertPEM(data)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.file, err)
		}
		files[sc.file] = cert.Raw
	}
	// Verified for the node's own address: a certificate lacking it fails.
	readyz := apiprobe.Readyz{CA: pool}
	addr := net.JoinHostPort(in.Address, strconv.Itoa(in.port()))
	start := time.Now()
	restarted := map[string]bool{}
	for {
		var stale []servedCert
		var last error
		for _, sc := range s.served {
			got, err := pr.served(ctx, c, net.JoinHostPort(in.Address, sc.port))
			switch {
			case err != nil:
				last = fmt.Errorf("%s at port %s: %w", sc.pod, sc.port, err)
			case !bytes.Equal(got.Raw, files[sc.file]):
				stale = append(stale, sc)
				last = fmt.Errorf("%s still serves its previous %s (valid until %s) at port %s", sc.pod, sc.file, stamp(got.NotAfter), sc.port)
			}
		}
		if last == nil {
			last = healthy(ctx, c, pr, in, s, readyz, addr)
		}
		if last == nil {
			return nil
		}
		if time.Since(start) > pr.timeout {
			return fmt.Errorf("not healthy after the change: %w", last)
		}
		if time.Since(start) > pr.reloadGrace {
			for _, sc := range stale {
				if !restarted[sc.pod] {
					p.GetLogger(ctx).Warningf("%s: %s still serves its previous %s; restarting it", in.Connection.Node, sc.pod, sc.file)
					_, _ = c.Run(ctx, scripts.Render("pods/kill", podOf(sc.pod)).String())
					restarted[sc.pod] = true
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pr.poll):
		}
	}
}

// healthy is one round of waitHealthy's checks but the served certificates.
func healthy(ctx context.Context, c ssh.Executor, pr probes, in ControlPlaneAddressArgs, s settle, readyz apiprobe.Readyz, addr string) error {
	if err := pr.etcd(ctx, c); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	if err := pr.readyz(ctx, c, readyz, addr); err != nil {
		return fmt.Errorf("apiserver: %w", err)
	}
	for _, pod := range s.components {
		if err := pr.healthz(ctx, c, nodefacts.HealthEndpoints[pod]); err != nil {
			return fmt.Errorf("%s: %w", pod, err)
		}
	}
	if s.endpoint {
		r := readyz
		r.ServerName, _, _ = net.SplitHostPort(in.Endpoint)
		if err := pr.readyz(ctx, c, r, in.Endpoint); err != nil {
			return fmt.Errorf("apiserver through the endpoint %s: %w", in.Endpoint, err)
		}
	}
	return nil
}

func etcdHealthy(ctx context.Context, c ssh.Executor) error {
	cli, err := etcdThrough(ctx, c)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := cli.Status(ctx, "https://127.0.0.1:2379")
	if err != nil {
		return err
	}
	if s.Leader == 0 {
		return fmt.Errorf("etcd member has no leader")
	}
	if len(s.Errors) > 0 {
		return fmt.Errorf("etcd: %v", s.Errors)
	}
	return nil
}
