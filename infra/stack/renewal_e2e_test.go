package stack

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/homelab-dev/homelab/infra/apiprobe"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// TestCertificatesInTheLab is issue 15 end to end, on one cluster. Built
// with ten-minute leaves and a nine-minute window, every leaf is due once
// a minute has passed; the next up renews all of them on every
// control-plane node, with the SANs the inventory requires, the new ones
// served on every port, and the API answering through the VIP throughout.
// That up declares a year's validity (and the same window), so the up
// after it is a no-op: ten-minute leaves would be due again a minute after
// their renewal. Then `up --renew-certificates` renews them all again,
// whatever their dates, as after a key leak; then kubelet.conf files that
// embed their certificate are repaired (checkKubeletClientRepair).
func TestCertificatesInTheLab(t *testing.T) {
	needE2E(t)
	// Built with Cilium's kube-proxy replacement from the start, and
	// checked as such (checkFreshCilium): every inventory below keeps it.
	e := newE2EWith(t, withDataplane("cilium"))
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()

	s := e.open(ctx, e.inventory("short", withCertificates("10m", "9m")))
	e.checkFreshCilium(ctx, s, func() { e.up(ctx, s) })
	e.verify(ctx, s)
	built := e.leaves(ctx, s.Inv)
	var last time.Time
	for _, certs := range built {
		for name, c := range certs {
			if left := time.Until(c.NotAfter); left > 10*time.Minute || left < 0 {
				t.Fatalf("%s valid for %s after the build: validityPeriod 10m was not applied", name, left.Round(time.Second))
			}
			if c.NotAfter.After(last) {
				last = c.NotAfter
			}
		}
	}
	if wait := time.Until(last.Add(-9*time.Minute)) + 5*time.Second; wait > 0 {
		t.Logf("waiting %s until every leaf is within renewBefore", wait.Round(time.Second))
		time.Sleep(wait)
	}

	year := e.open(ctx, e.inventory("year", withCertificates("8760h", "9m")))
	changes, err := year.PreviewChanges(ctx, true)
	if err != nil {
		t.Fatalf("preview: %v", err)
	}
	for _, cp := range year.Inv.ControlPlanes() {
		c, ok := changeOf(changes, "homelab:index:ControlPlaneAddress", cp.Name)
		if !ok || len(c.Renews) != len(built[cp.Name]) {
			t.Errorf("preview of %s's renewal: %+v, want its %d certificates named", cp.Name, c, len(built[cp.Name]))
		}
	}
	e.mutating()
	renewed := e.renewWatched(ctx, year, built, Run{}, "due")
	e.verify(ctx, year)
	if rep := e.doctor(ctx, year.Inv, year.Bundle); !rep.OK() {
		t.Errorf("doctor after the renewal: %v", rep.Failed())
	}
	e.checkNoOp(ctx, year, "after the renewal")

	// --renew-certificates for one node is that node alone in preview.
	changes, err = year.PreviewChangesFor(ctx, true, Run{RenewCertificates: []string{"cp-2"}})
	if err != nil {
		t.Fatalf("preview --renew-certificates=cp-2: %v", err)
	}
	for _, c := range changes {
		if len(c.Renews) > 0 && c.Name != "cp-2" {
			t.Errorf("preview --renew-certificates=cp-2 renews on %s: %v", c.Name, c.Renews)
		}
	}
	if c, ok := changeOf(changes, "homelab:index:ControlPlaneAddress", "cp-2"); !ok || len(c.Renews) != len(renewed["cp-2"]) {
		t.Errorf("preview --renew-certificates=cp-2: %+v", c)
	}
	e.renewWatched(ctx, year, renewed, Run{RenewCertificates: []string{"*"}}, "asked for")
	e.verify(ctx, year)
	e.checkNoOp(ctx, year, "after --renew-certificates")

	e.checkKubeletClientRepair(ctx, year)
}

// renewWatched runs one up that must renew every leaf of before on every
// control-plane node, probing the API through the VIP and etcd meanwhile,
// and checks the result; it returns the leaves after it.
func (e *e2e) renewWatched(ctx context.Context, s *Stack, before map[string]map[string]*x509.Certificate, run Run, why string) map[string]map[string]*x509.Certificate {
	t := e.t
	t.Helper()
	var etcd []string
	for _, cp := range s.Inv.ControlPlanes() {
		etcd = append(etcd, "https://"+net.JoinHostPort(cp.Address, "2379"))
	}
	w := e.watch(ctx, s.Bundle, s.Inv.EndpointHost(), etcd)
	start := time.Now()
	if _, err := s.UpFor(ctx, true, run); err != nil {
		w.end()
		t.Fatalf("up renewing the %s certificates: %v", why, err)
	}
	w.end()
	t.Logf("figures: renewing the %s certificates took %s; %s", why, time.Since(start).Round(time.Millisecond), w)
	if w.longestAPI > 2*time.Second {
		t.Errorf("/readyz through the VIP failed every probe for %s while renewing", w.longestAPI.Round(time.Millisecond))
	}
	if w.etcdFail > 0 {
		t.Errorf("%d linearizable etcd reads failed while renewing", w.etcdFail)
	}
	after := e.leaves(ctx, s.Inv)
	renewBefore := s.Inv.Cluster.Certificates.Renewal()
	for node, certs := range after {
		if len(certs) != len(before[node]) {
			t.Errorf("%s holds %d renewable certificates after the renewal, %d before", node, len(certs), len(before[node]))
		}
		for name, c := range certs {
			old := before[node][name]
			switch {
			case old == nil:
				t.Errorf("%s:%s: not read before", node, name)
			case c.SerialNumber.Cmp(old.SerialNumber) == 0:
				t.Errorf("%s:%s was not renewed (serial %s)", node, name, c.SerialNumber)
			case !c.NotAfter.After(old.NotAfter) || time.Until(c.NotAfter) <= renewBefore:
				t.Errorf("%s:%s renewed until %s (was %s): not beyond renewBefore", node, name, c.NotAfter, old.NotAfter)
			}
			if sc, ok := nodefacts.ServingCertOf(strings.TrimPrefix(name, nodefacts.PKIDir+"/")); ok {
				if missing, extra := nodefacts.CompareSANs(nodefacts.SANs(c), sc.Required(s.Inv), sc.AllowedExtras()); len(missing)+len(extra) > 0 {
					t.Errorf("%s:%s renewed with SANs lacking %v, with extra %v", node, name, missing, extra)
				}
			}
		}
		e.checkServed(ctx, s.Inv, node, certs)
	}
	return after
}

// checkServed compares the certificate each of node's servers serves with
// the file it serves it from: a renewed file is not yet a renewed server.
func (e *e2e) checkServed(ctx context.Context, inv *inventory.Inventory, node string, files map[string]*x509.Certificate) {
	n, _ := inv.Node(node)
	for port, file := range map[string]string{"6443": nodefacts.APIServerCert, "2379": nodefacts.EtcdServerCert, "2380": nodefacts.EtcdPeerCert} {
		want := files[nodefacts.PKIFile(file)]
		got, err := apiprobe.ServedCertificate(ctx, e.lab.Dial, net.JoinHostPort(n.Address, port))
		switch {
		case err != nil:
			e.t.Errorf("%s:%s: %v", node, port, err)
		case want == nil:
			e.t.Errorf("%s: %s not read", node, file)
		case !got.Equal(want):
			e.t.Errorf("%s:%s serves serial %s until %s, the file %s holds %s until %s", node, port, got.SerialNumber, got.NotAfter, file, want.SerialNumber, want.NotAfter)
		}
	}
	if vip := inv.EndpointHost(); files[nodefacts.PKIFile(nodefacts.APIServerCert)] != nil {
		if err := files[nodefacts.PKIFile(nodefacts.APIServerCert)].VerifyHostname(vip); err != nil {
			e.t.Errorf("%s's apiserver certificate: %v", node, err)
		}
	}
}

// checkNoOp runs an up that must change nothing and run nothing that
// mutates.
func (e *e2e) checkNoOp(ctx context.Context, s *Stack, when string) {
	e.t.Helper()
	e.mutating()
	for op, n := range e.up(ctx, s) {
		if op != "same" && n > 0 {
			e.t.Errorf("up %s: %d %s", when, n, op)
		}
	}
	if m := e.mutating(); len(m) > 0 {
		e.t.Errorf("up %s ran mutating commands: %v", when, m)
	}
}

// leaves reads every renewable certificate of every control-plane node,
// by node and path.
func (e *e2e) leaves(ctx context.Context, inv *inventory.Inventory) map[string]map[string]*x509.Certificate {
	out := map[string]map[string]*x509.Certificate{}
	for _, cp := range inv.ControlPlanes() {
		out[cp.Name] = map[string]*x509.Certificate{}
		for _, r := range nodefacts.Renewables {
			// super-admin.conf is the bootstrap node's alone (kubeadm
			// init writes it; a join does not).
			data := e.node(ctx, cp.Name, "cat "+r.Path+" 2>/dev/null || true")
			if data == "" {
				continue
			}
			c, err := leafOf(r, []byte(data))
			if err != nil {
				e.t.Fatalf("%s:%s: %v", cp.Name, r.Path, err)
			}
			out[cp.Name][r.Path] = c
		}
	}
	return out
}

// leafOf parses a certificate file, or the client certificate a
// kubeconfig embeds.
func leafOf(r nodefacts.Renewable, data []byte) (*x509.Certificate, error) {
	if !r.Kubeconfig() {
		return nodefacts.ParseCertPEM(data)
	}
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, err
	}
	for _, a := range kc.AuthInfos {
		if len(a.ClientCertificateData) > 0 {
			return nodefacts.ParseCertPEM(a.ClientCertificateData)
		}
	}
	return nil, fmt.Errorf("no embedded client certificate")
}

// withCertificates sets cluster.certificates.
func withCertificates(validity, renewBefore string) func(string) string {
	return func(s string) string {
		return strings.Replace(s, "cluster:\n", fmt.Sprintf("cluster:\n  certificates: {validityPeriod: %s, renewBefore: %s}\n", validity, renewBefore), 1)
	}
}

// changeOf finds the preview's step for that resource.
func changeOf(changes []Change, typ, name string) (Change, bool) {
	for _, c := range changes {
		if c.Type == typ && c.Name == name {
			return c, true
		}
	}
	return Change{}, false
}
