package doctor

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/homelab-dev/homelab/infra/apiprobe"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// A renewed file is not yet a renewed server: the apiserver and etcd
// read their serving certificates from the files, and until one has, its
// clients and peers see the old certificate, its dates and its SANs.

// servedVerdict compares the certificate a server presented with the file
// at path it is configured to serve, byte for byte.
func servedVerdict(path string, file, served *x509.Certificate) (Status, string) {
	if bytes.Equal(file.Raw, served.Raw) {
		return OK, fmt.Sprintf("serves %s (serial %s, until %s)", path, serialOf(file), servedStamp(file.NotAfter))
	}
	switch {
	case file.NotAfter.After(served.NotAfter):
		return Fail, fmt.Sprintf("serves a certificate valid until %s (serial %s), the file is valid until %s (serial %s): renewed, not yet reloaded",
			servedStamp(served.NotAfter), serialOf(served), servedStamp(file.NotAfter), serialOf(file))
	case served.NotAfter.After(file.NotAfter):
		return Fail, fmt.Sprintf("serves a certificate valid until %s (serial %s), beyond the file's %s (serial %s): the file is older than what runs, or the server reads another file",
			servedStamp(served.NotAfter), serialOf(served), servedStamp(file.NotAfter), serialOf(file))
	}
	return Fail, fmt.Sprintf("serves serial %s, the file holds serial %s (both valid until %s): another certificate than the file",
		serialOf(served), serialOf(file), servedStamp(file.NotAfter))
}

// serialOf is written in hex, as nodefacts.Expiry and openssl write it.
func serialOf(c *x509.Certificate) string { return c.SerialNumber.Text(16) }

// servedStamp is to the second: a renewal can move NotAfter by less than
// a minute when the validity is short.
func servedStamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 MST") }

// checkServed makes a TLS handshake with every server of a serving
// certificate on each reached control-plane node, at the node's live
// address, and compares what it presents with the file the probe read.
func (d *doctor) checkServed(ctx context.Context) {
	var wg sync.WaitGroup
	for _, n := range d.t.Inventory.ControlPlanes() {
		// An unreached node's rows say why; there is no file to compare.
		f := d.nodes[n.Name]
		if f == nil || !f.reached {
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); d.checkServedOn(ctx, n, f) }()
	}
	wg.Wait()
}

func (d *doctor) checkServedOn(ctx context.Context, n inventory.Node, f *nodeFacts) {
	addr := d.liveAddress(n)
	type silent struct {
		sc    nodefacts.ServingCert
		where string
		err   error
	}
	answered := map[string]bool{}
	var silents []silent
	for _, sc := range nodefacts.ServingCerts {
		// A missing or unreadable file is cert sans' FAIL already.
		file, ok := f.live.Cert(sc.File)
		if !ok {
			continue
		}
		port := strconv.Itoa(sc.ServedPort(d.t.Inventory.Cluster.Endpoint.Port))
		where := n.Name + ":" + port
		served, err := apiprobe.ServedCertificate(ctx, d.t.Dial, net.JoinHostPort(addr, port))
		if err != nil {
			silents = append(silents, silent{sc, where, err})
			continue
		}
		answered[sc.Server] = true
		path := nodefacts.PKIFile(sc.File)
		st, detail := servedVerdict(path, file, served)
		d.r.add("cert served", where, st, "%s", detail)
		if st == Fail {
			d.r.cause("%s", servedCause(n, f, sc, net.JoinHostPort(addr, port)))
		}
	}
	// A server that answers nowhere is down, which the api tls and etcd
	// member rows report; one that answers on its other port but not on
	// this one is news.
	for _, s := range silents {
		if answered[s.sc.Server] {
			d.r.add("cert served", s.where, Warn, "%s answers on its other port, not here: %v; cannot compare with %s", s.sc.Server, s.err, nodefacts.PKIFile(s.sc.File))
		}
	}
}

// servedCause names the node, the server and its port, and the fix.
func servedCause(n inventory.Node, f *nodeFacts, sc nodefacts.ServingCert, at string) string {
	path := nodefacts.PKIFile(sc.File)
	manifest := nodefacts.Manifest(sc.Server)
	c := fmt.Sprintf("%s's %s at %s does not serve %s: its clients and peers see another certificate's dates and SANs. ", n.Name, sc.Server, at, path)
	if fl, ok := f.live.Flags(sc.Server); ok && fl[sc.Flag] != "" && fl[sc.Flag] != path {
		c += fmt.Sprintf("Its manifest's --%s names %s instead. ", sc.Flag, fl[sc.Flag])
	}
	if sc.Server == nodefacts.KubeAPIServer {
		c += "The apiserver reloads its serving certificate from the file within a minute by itself; if this persists, "
	} else {
		c += "etcd reads its certificate files at every new TLS handshake, so it does not read this one; "
	}
	return c + fmt.Sprintf("restart that static pod on %s: move %s out of %s, wait 20 s (the kubelet's fileCheckFrequency) for the pod to stop, and move it back; or run homelab up --renew-certificates=%s, which re-issues that node's certificates and restarts a server still serving an old one",
		n.Name, manifest, nodefacts.ManifestsDir, n.Name)
}
