package stack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/homelab-dev/homelab/infra/doctor"
	"github.com/homelab-dev/homelab/infra/lab"
	"github.com/homelab-dev/homelab/infra/netns"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/pki"
)

func (e *e2e) doctor(ctx context.Context, inv *inventory.Inventory, b *pki.Bundle) *doctor.Report {
	e.t.Helper()
	key, err := readFile(e.lab.KeyPath())
	if err != nil {
		e.t.Fatal(err)
	}
	rep, err := doctor.Run(ctx, doctor.Target{Inventory: inv, Bundle: b, PrivateKey: key, KnownHosts: e.lab.KnownHostsPath(), Dial: netns.DialerFor(lab.GatewayNetns)})
	if err != nil {
		e.t.Fatal(err)
	}
	var out strings.Builder
	rep.Write(&out)
	e.t.Logf("doctor:\n%s", out.String())
	return rep
}

func causesMention(rep *doctor.Report, words ...string) bool {
	for _, c := range rep.Causes {
		all := true
		for _, w := range words {
			all = all && strings.Contains(c, w)
		}
		if all {
			return true
		}
	}
	return false
}

// watch probes, every 500 ms until stopped, etcd with a linearizable read
// through the members that stay put, and /readyz through the VIP.
type watch struct {
	mu                    sync.Mutex
	etcdFail, apiFail     int
	probes                int
	longestAPI, curAPIOff time.Duration
	stop                  chan struct{}
	done                  sync.WaitGroup
}

func (e *e2e) watch(ctx context.Context, b *pki.Bundle, vip string, etcdEPs []string) *watch {
	w := &watch{stop: make(chan struct{})}
	crt, key, err := pki.ClientCert(b.Talos.Certs.Etcd.Crt, b.Talos.Certs.Etcd.Key, "test", "system:masters", time.Hour)
	if err != nil {
		e.t.Fatal(err)
	}
	pair, _ := tls.X509KeyPair(crt, key)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.Talos.Certs.Etcd.Crt)
	dial := netns.DialerFor(lab.GatewayNetns)
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcdEPs, DialTimeout: 3 * time.Second,
		TLS: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}},
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return dial(ctx, "tcp", a)
		})}})
	if err != nil {
		e.t.Fatal(err)
	}
	kpool := x509.NewCertPool()
	kpool.AppendCertsFromPEM(b.Talos.Certs.K8s.Crt)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: kpool, ServerName: vip}}}
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		defer cli.Close()
		last := time.Now()
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, eerr := cli.Get(rctx, "/registry/namespaces/default")
			cancel()
			resp, aerr := hc.Get("https://" + net.JoinHostPort(vip, "6443") + "/readyz")
			if aerr == nil {
				resp.Body.Close()
			}
			now := time.Now()
			w.mu.Lock()
			w.probes++
			if eerr != nil {
				w.etcdFail++
			}
			if aerr != nil || resp.StatusCode != 200 {
				w.apiFail++
				w.curAPIOff += now.Sub(last)
				if w.curAPIOff > w.longestAPI {
					w.longestAPI = w.curAPIOff
				}
			} else {
				w.curAPIOff = 0
			}
			w.mu.Unlock()
			last = now
		}
	}()
	return w
}

func (w *watch) end() {
	close(w.stop)
	w.done.Wait()
}

// TestReaddressInTheLab is issue 6's first scenario, the seed's incident:
// cp-1 comes back on another address. doctor names the cause; once the
// inventory has the new address one up recovers, with etcd keeping quorum
// and the VIP endpoint unchanged throughout.
func TestReaddressInTheLab(t *testing.T) {
	needE2E(t)
	e := newE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	s := e.open(ctx, e.invPath)
	e.up(ctx, s)
	e.verify(ctx, s)
	if rep := e.doctor(ctx, s.Inv, s.Bundle); !rep.OK() {
		t.Errorf("doctor on a healthy cluster: %v", rep.Failed())
	}
	e.mutating()

	const oldAddr, newAddr = "10.77.0.120", "10.77.0.140"
	start := time.Now()
	if err := e.lab.Readdress(ctx, "cp-1", newAddr); err != nil {
		t.Fatal(err)
	}
	t.Logf("figures: readdress %s", time.Since(start).Round(time.Millisecond))
	time.Sleep(5 * time.Second) // let etcd and the apiserver try, and fail

	// Before the inventory knows: doctor finds cp-1 by its MAC.
	rep := e.doctor(ctx, s.Inv, s.Bundle)
	if rep.OK() {
		t.Error("doctor passed a re-addressed cp-1")
	}
	if !causesMention(rep, "cp-1", newAddr, oldAddr) {
		t.Errorf("doctor did not say cp-1 moved from %s to %s: %v", oldAddr, newAddr, rep.Causes)
	}
	if !causesMention(rep, "etcd", "cannot bind") {
		t.Errorf("doctor did not name etcd's bind failure: %v", rep.Causes)
	}
	if !causesMention(rep, "lack", newAddr) {
		t.Errorf("doctor did not name the certificate lacking %s: %v", newAddr, rep.Causes)
	}
	if !causesMention(rep, "peer URL", "stale") {
		t.Errorf("doctor did not name the stale peer URL: %v", rep.Causes)
	}

	moved := e.inventory("moved", func(s string) string {
		return strings.Replace(s, "address: "+oldAddr, "address: "+newAddr, 1)
	})
	s2 := e.open(ctx, moved)
	rep = e.doctor(ctx, s2.Inv, s2.Bundle)
	if rep.OK() || !causesMention(rep, "cp-1", "etcd", "cannot bind") {
		t.Errorf("doctor with the new inventory: ok=%v causes %v", rep.OK(), rep.Causes)
	}

	changes, err := s2.PreviewChanges(ctx, true)
	if err != nil {
		t.Fatalf("preview: %v", err)
	}
	var listed []string
	for _, c := range changes {
		listed = append(listed, c.Op+" "+c.Type+" "+c.Name)
	}
	t.Logf("preview after the re-address:\n  %s", strings.Join(listed, "\n  "))
	for _, want := range []string{"update homelab:index:Host cp-1", "update homelab:index:EtcdMembers etcd",
		"update homelab:index:ControlPlaneAddress cp-1", "update homelab:index:ControlPlaneAddress cp-2"} {
		if !containsString(listed, want) {
			t.Errorf("preview lacks %q", want)
		}
	}
	for _, l := range listed {
		if strings.Contains(l, ":Host ") && !strings.HasSuffix(l, " cp-1") {
			t.Errorf("preview shows a hardware change elsewhere: %s", l)
		}
		// Workers and labels have nothing to do with cp-1's address.
		if strings.Contains(l, "gpu-") || strings.Contains(l, ":NodeMeta ") {
			t.Errorf("preview shows an unaffected resource: %s", l)
		}
	}

	e.log.Reset()
	w := e.watch(ctx, s2.Bundle, s2.Inv.EndpointHost(), []string{"https://10.77.0.121:2379", "https://10.77.0.122:2379"})
	start = time.Now()
	e.up(ctx, s2)
	w.end()
	t.Logf("figures: recovering up %s; %d probes: %d failed etcd reads, %d failed /readyz through the VIP (longest outage %s)",
		time.Since(start).Round(time.Millisecond), w.probes, w.etcdFail, w.apiFail, w.longestAPI.Round(time.Millisecond))
	for _, l := range strings.Split(e.log.String(), "\n") {
		if strings.Contains(l, "ControlPlaneAddress") || strings.Contains(l, "etcd member") || strings.Contains(l, "restarting") {
			t.Logf("engine: %s", strings.TrimSpace(l))
		}
	}
	if w.etcdFail > 0 {
		t.Errorf("etcd failed %d linearizable reads during the recovery: quorum lost", w.etcdFail)
	}
	e.verify(ctx, s2)
	if rep := e.doctor(ctx, s2.Inv, s2.Bundle); !rep.OK() {
		t.Errorf("doctor after the recovery: %v", rep.Failed())
	}
	if out := e.node(ctx, "cp-2", "grep -c "+newAddr+" /etc/keepalived/keepalived.conf || true"); strings.TrimSpace(out) == "0" {
		t.Errorf("cp-2's keepalived does not peer with %s", newAddr)
	}
	if out := e.node(ctx, "cp-1", "grep -l "+oldAddr+" /etc/kubernetes/*.conf /etc/kubernetes/manifests/*.yaml /var/lib/kubelet/kubeadm-flags.env 2>/dev/null || true"); strings.TrimSpace(out) != "" {
		t.Errorf("cp-1 still has its old address in:\n%s", out)
	}
	e.mutating()
	changesAfter := e.up(ctx, s2)
	for op, n := range changesAfter {
		if op != "same" && n > 0 {
			t.Errorf("up after the recovery: %d %s", n, op)
		}
	}
	if m := e.mutating(); len(m) > 0 {
		t.Errorf("up after the recovery ran mutating commands: %v", m)
	}

	e.checkHostKeyRefused(ctx, s2)
}

// checkHostKeyRefused replaces gpu-4 (new disk, host key and MAC) behind
// the user's back: known_hosts keeps the old key, as the user's own does.
// Preview refuses, naming the command; after the explicit acceptance it
// runs and shows the new MAC on gpu-4's Host alone.
func (e *e2e) checkHostKeyRefused(ctx context.Context, s *Stack) {
	t := e.t
	if err := e.lab.Replace(ctx, "gpu-4"); err != nil {
		t.Fatal(err)
	}
	e.acceptReplaced(ctx, s, "gpu-4")
	changes, err := s.PreviewChanges(ctx, true)
	if err != nil {
		t.Fatalf("preview after accepting gpu-4's key: %v", err)
	}
	var listed []string
	for _, c := range changes {
		listed = append(listed, c.Op+" "+c.Type+" "+c.Name)
	}
	t.Logf("preview after gpu-4 was replaced:\n  %s", strings.Join(listed, "\n  "))
	if !containsString(listed, "update homelab:index:Host gpu-4") {
		t.Errorf("preview does not show gpu-4's new MAC")
	}
	for _, l := range listed {
		if strings.Contains(l, ":Host ") && !strings.HasSuffix(l, " gpu-4") {
			t.Errorf("preview shows a hardware change elsewhere: %s", l)
		}
	}
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func readFile(p string) ([]byte, error) { return os.ReadFile(p) }
