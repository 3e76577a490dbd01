package provider

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"maps"
	"math/big"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/apiprobe"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

func TestRenewalsDue(t *testing.T) {
	now := time.Date(2027, 6, 1, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for _, tc := range []struct {
		name     string
		expiries map[string]time.Time
		want     []string // name: a word of why
	}{
		{"none read", nil, nil},
		{"every one far off", map[string]time.Time{"apiserver.crt": now.Add(300 * day), "admin.conf": now.Add(31 * day)}, nil},
		{"one inside the window", map[string]time.Time{"apiserver.crt": now.Add(300 * day), "admin.conf": now.Add(12 * day)},
			[]string{"admin.conf: expires 2027-06-13 12:00 UTC (in 12 days, within renewBefore 720h0m0s)"}},
		{"exactly renewBefore left", map[string]time.Time{"etcd/peer.crt": now.Add(30 * day)},
			[]string{"etcd/peer.crt: expires 2027-07-01 12:00 UTC (in 30 days, within renewBefore 720h0m0s)"}},
		{"expired, and one due, in name order", map[string]time.Time{"scheduler.conf": now.Add(-90 * time.Minute), "apiserver.crt": now.Add(time.Hour)},
			[]string{"apiserver.crt: expires 2027-06-01 13:00 UTC (in 1h0m0s, within renewBefore 720h0m0s)", "scheduler.conf: expired 2027-06-01 10:30 UTC (1h30m0s ago)"}},
	} {
		var got []string
		for _, r := range renewalsDue(tc.expiries, now, 30*day) {
			if !r.NotAfter.Equal(tc.expiries[r.Name]) {
				t.Errorf("%s: %s's NotAfter %s, read %s", tc.name, r.Name, r.NotAfter, tc.expiries[r.Name])
			}
			got = append(got, r.Name+": "+r.Why)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
	all := renewalsAll(map[string]time.Time{"apiserver.crt": now.Add(300 * day), "admin.conf": now.Add(200 * day)})
	if len(all) != 2 || all[0].Name != "admin.conf" || !strings.Contains(all[1].Why, "--renew-certificates") {
		t.Errorf("asked for: %v", all)
	}
}

// fakePKI is a control-plane node's kubeadm certificates as the fake
// node's kubeadm issues and its components serve them: the expiry and
// SAN probes read them, `kubeadm init phase certs` and `kubeadm certs
// renew` issue the ones they name again, and the probes' served
// certificate is the file's (the apiserver and etcd reload theirs), or the
// previous one until its pod is restarted when lagging says so.
type fakePKI struct {
	t        *testing.T
	n        *fakeNode
	key      *ecdsa.PrivateKey
	ca       *x509.Certificate
	now      time.Time
	validity time.Duration
	sans     map[string][]string // serving certificates' SANs, by name
	certs    map[string][]byte   // DER, by renewable name
	previous map[string][]byte
	// frozen: kubeadm exits 0 and issues nothing (an external CA).
	frozen bool
	// lagging pods serve their previous certificate until restarted.
	lagging  map[string]bool
	restarts []string
}

var apiSANs, etcdSANs = []string{"10.0.0.100", "10.0.0.11", "cp-1"}, []string{"10.0.0.11", "127.0.0.1", "cp-1", "localhost"}

// newFakePKI issues every renewable certificate of n to expire at
// notAfter[name], else a year after yesterday.
func newFakePKI(t *testing.T, n *fakeNode, notAfter map[string]time.Time) *fakePKI {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(87600 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	f := &fakePKI{t: t, n: n, key: key, ca: ca, now: now, validity: 8760 * time.Hour,
		sans:  map[string][]string{nodefacts.APIServerCert: apiSANs, nodefacts.EtcdServerCert: etcdSANs, nodefacts.EtcdPeerCert: etcdSANs},
		certs: map[string][]byte{}, previous: map[string][]byte{}, lagging: map[string]bool{}}
	n.put(nodefacts.CACert, string(pemOf(der)), 0o644)
	for _, r := range nodefacts.Renewables {
		at, ok := notAfter[r.Name()]
		if !ok {
			at = now.Add(f.validity - 24*time.Hour) // issued yesterday
		}
		f.issue(r.Name(), at)
	}
	f.previous = maps.Clone(f.certs)
	for _, s := range []string{"nodefacts/live", "nodefacts/expiry"} {
		n.onScriptFunc(s, func(string) (ssh.Result, error) { return ssh.Result{Stdout: []byte(f.probe())}, nil })
	}
	phase := regexp.MustCompile(`kubeadm init phase certs (\S+)`)
	n.onScriptFunc("certs/issue", func(cmd string) (ssh.Result, error) {
		for _, m := range phase.FindAllStringSubmatch(cmd, -1) {
			f.reissue(func(r nodefacts.Renewable) bool { return r.Phase == m[1] })
		}
		return ssh.Result{}, nil
	})
	renew := regexp.MustCompile(`kubeadm certs renew '([^']+)'`)
	n.onScriptFunc("certs/renew-kubeconfigs", func(cmd string) (ssh.Result, error) {
		for _, m := range renew.FindAllStringSubmatch(cmd, -1) {
			f.reissue(func(r nodefacts.Renewable) bool { return r.Kubeconfig() && r.Name() == m[1] })
		}
		return ssh.Result{}, nil
	})
	// Each ends the static pods' processes: the kubelet starts them again.
	for _, name := range []string{"pods/restart", "pods/kill", "revival/restart"} {
		n.onScriptFunc(name, func(cmd string) (ssh.Result, error) {
			for _, pod := range nodefacts.ControlPlaneComponents {
				if strings.Contains(cmd, nodefacts.ProcessPattern(pod)) {
					f.restarts = append(f.restarts, pod)
					delete(f.lagging, pod)
				}
			}
			return ssh.Result{}, nil
		})
	}
	return f
}

func pemOf(der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}) }

func (f *fakePKI) issue(name string, notAfter time.Time) {
	f.t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name}, NotBefore: f.now.Add(-time.Hour), NotAfter: notAfter}
	for _, s := range f.sans[name] {
		if ip := net.ParseIP(s); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, s)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, f.ca, &f.key.PublicKey, f.key)
	if err != nil {
		f.t.Fatal(err)
	}
	f.previous[name], f.certs[name] = f.certs[name], der
	if r, _ := nodefacts.RenewableNamed(name); !r.Kubeconfig() {
		f.n.put(nodefacts.PKIFile(name), string(pemOf(der)), 0o644)
	}
}

func (f *fakePKI) reissue(match func(nodefacts.Renewable) bool) {
	if f.frozen {
		return
	}
	for _, r := range nodefacts.Renewables {
		if match(r) {
			f.issue(r.Name(), time.Now().Add(f.validity))
		}
	}
}

// probe answers nodefacts/live: the serving certificates whole
// (nodefacts/probe), every certificate for its dates (nodefacts/expiry).
// Its expiry lines answer nodefacts/expiry alone.
func (f *fakePKI) probe() string {
	var b strings.Builder
	for _, sc := range nodefacts.ServingCerts {
		fmt.Fprintf(&b, "file=%s \n", nodefacts.PKIFile(sc.File))
		for _, l := range strings.Split(strings.TrimSuffix(string(pemOf(f.certs[sc.File])), "\n"), "\n") {
			fmt.Fprintf(&b, "line %s=%s\n", nodefacts.PKIFile(sc.File), l)
		}
	}
	for _, r := range nodefacts.Renewables {
		kind := "cert"
		if r.Kubeconfig() {
			kind = "kubeconfig-cert"
		}
		fmt.Fprintf(&b, "%s=%s %s\n", kind, r.Path, base64.StdEncoding.EncodeToString(pemOf(f.certs[r.Name()])))
	}
	return b.String()
}

func (f *fakePKI) notAfter(name string) time.Time {
	c, err := x509.ParseCertificate(f.certs[name])
	if err != nil {
		f.t.Fatal(err)
	}
	return c.NotAfter
}

// fakeProbes answer for the fake nodes' components, healthy, and log each
// question as a "probe" event on the node, between its commands.
func fakeProbes(pkis map[string]*fakePKI) probes {
	log := func(c ssh.Executor, what string) *fakePKI {
		n := c.(*fakeConn).node
		n.record(fakeEvent{kind: "probe", cmd: what})
		return pkis[n.name]
	}
	return probes{
		etcd: func(ctx context.Context, c ssh.Executor) error { log(c, "etcd"); return nil },
		readyz: func(ctx context.Context, c ssh.Executor, r apiprobe.Readyz, addr string) error {
			what := "readyz " + addr
			if r.ServerName != "" {
				what += " as " + r.ServerName
			}
			log(c, what)
			return nil
		},
		served: func(ctx context.Context, c ssh.Executor, addr string) (*x509.Certificate, error) {
			f := log(c, "served "+addr)
			_, port, _ := net.SplitHostPort(addr)
			file, pod := map[string]string{"6443": nodefacts.APIServerCert, "2379": nodefacts.EtcdServerCert, "2380": nodefacts.EtcdPeerCert}[port], nodefacts.Etcd
			if port == "6443" {
				pod = nodefacts.KubeAPIServer
			}
			der := f.certs[file]
			if f.lagging[pod] {
				der = f.previous[file]
			}
			return x509.ParseCertificate(der)
		},
		healthz: func(ctx context.Context, c ssh.Executor, endpoint string) error {
			log(c, "healthz "+endpoint)
			return nil
		},
		poll: time.Millisecond, timeout: 2 * time.Second, reloadGrace: 30 * time.Millisecond,
	}
}

// probed lists the probe events, in order.
func (n *fakeNode) probed() []string {
	var out []string
	for _, e := range n.events {
		if e.kind == "probe" {
			out = append(out, e.cmd)
		}
	}
	return out
}

// renewalLab is cp-1 with its certificates, its ControlPlaneAddress
// inputs and the state a refresh reads.
type renewalLab struct {
	lab *fakeLab
	n   *fakeNode
	pki *fakePKI
	ctx context.Context
	in  ControlPlaneAddressArgs
}

func newRenewalLab(t *testing.T, notAfter map[string]time.Time) *renewalLab {
	lab := newFakeLab(t)
	n := lab.node("cp-1")
	pki := newFakePKI(t, n, notAfter)
	in := ControlPlaneAddressArgs{Connection: lab.conn("cp-1"), Address: n.addr, APIServerSANs: apiSANs, EtcdSANs: etcdSANs,
		ConfigPath: "/etc/kubernetes/kubeadm/init.yaml", Port: 6443, RenewBefore: "720h", Endpoint: "10.0.0.100:6443"}
	return &renewalLab{lab: lab, n: n, pki: pki, ctx: withProbes(lab.ctx(), fakeProbes(map[string]*fakePKI{"cp-1": pki})), in: in}
}

// refreshed is the state a refresh of cp-1 records.
func (l *renewalLab) refreshed(t *testing.T) ControlPlaneAddressState {
	st := refresh(t, l.ctx, ControlPlaneAddress{}, l.in, ControlPlaneAddressState{ControlPlaneAddressArgs: l.in})
	l.n.reset()
	return st
}

func (l *renewalLab) diff(t *testing.T, st ControlPlaneAddressState) []string {
	t.Helper()
	return diffKeysIn(t, l.ctx, ControlPlaneAddress{}, l.in, st)
}

func (l *renewalLab) update(st ControlPlaneAddressState) (ControlPlaneAddressState, error) {
	resp, err := ControlPlaneAddress{}.Update(l.ctx, infer.UpdateRequest[ControlPlaneAddressArgs, ControlPlaneAddressState]{ID: "cp-1", Inputs: l.in, State: st})
	return resp.Output, err
}

// phases are the kubeadm renewals a mutating command ran.
var renewalCommand = regexp.MustCompile(`kubeadm (init phase certs|certs renew) '?([^' ]+)`)

func renewalCommands(mutations []string) []string {
	var out []string
	for _, m := range mutations {
		for _, c := range renewalCommand.FindAllStringSubmatch(m, -1) {
			out = append(out, c[1]+" "+c[2])
		}
	}
	return out
}

func TestNothingDueRunsNothing(t *testing.T) {
	l := newRenewalLab(t, map[string]time.Time{"admin.conf": time.Now().Add(31 * 24 * time.Hour)})
	st := l.refreshed(t)
	if len(st.LiveExpiry) != len(nodefacts.Renewables) {
		t.Errorf("refresh read %v", st.LiveExpiry)
	}
	if keys := l.diff(t, st); len(keys) > 0 {
		t.Errorf("preview shows %v", keys)
	}
	// An update for another reason (the engine's, or a retry) renews nothing.
	if _, err := l.update(st); err != nil {
		t.Fatal(err)
	}
	if m, pr := l.n.mutations(), l.n.probed(); len(m) > 0 || len(pr) > 0 {
		t.Errorf("ran %v, probed %v", m, pr)
	}
}

// A kubeconfig's certificate is due: `kubeadm certs renew` for it alone,
// its pod restarted, then the node's and the endpoint's /readyz and the
// pod's health, before the next node would be touched.
func TestOneKubeconfigDue(t *testing.T) {
	soon := time.Now().Add(10 * 24 * time.Hour).UTC().Truncate(time.Second)
	l := newRenewalLab(t, map[string]time.Time{"controller-manager.conf": soon})
	st := l.refreshed(t)
	if keys := l.diff(t, st); !slices.Equal(keys, []string{`liveExpiry["controller-manager.conf"]`}) {
		t.Errorf("preview shows %v", keys)
	}
	if got := st.LiveExpiry["controller-manager.conf"]; got != soon.Format(time.RFC3339) {
		t.Errorf("the preview's date: %s, want %s", got, soon.Format(time.RFC3339))
	}
	out, err := l.update(st)
	if err != nil {
		t.Fatal(err)
	}
	m := l.n.mutations()
	if got := renewalCommands(m); !slices.Equal(got, []string{"certs renew controller-manager.conf"}) {
		t.Errorf("renewed %v", got)
	}
	if len(m) != 2 || !strings.Contains(m[0], "--config '/etc/kubernetes/kubeadm/init.yaml'") || !strings.Contains(m[1], nodefacts.ProcessPattern(nodefacts.KubeControllerManager)) {
		t.Errorf("commands %q, want the renewal, then the controller-manager's restart", m)
	}
	if !slices.Equal(l.pki.restarts, []string{nodefacts.KubeControllerManager}) {
		t.Errorf("restarted %v", l.pki.restarts)
	}
	want := []string{"etcd", "readyz 10.0.0.11:6443", "healthz 127.0.0.1:10257/healthz", "readyz 10.0.0.100:6443 as 10.0.0.100"}
	if pr := l.n.probed(); !slices.Equal(pr, want) {
		t.Errorf("probed %v, want %v", pr, want)
	}
	if !l.pki.notAfter("controller-manager.conf").After(soon) || out.LiveExpiry["controller-manager.conf"] == st.LiveExpiry["controller-manager.conf"] {
		t.Errorf("state after: %s", out.LiveExpiry["controller-manager.conf"])
	}
}

// A serving certificate is due: its phase alone in a staging directory
// with the one CA it needs and the SANs of the node's kubeadm config, no
// restart (the apiserver reloads it), and the node counts as done only
// once it serves the new one.
func TestOneServingCertificateDue(t *testing.T) {
	l := newRenewalLab(t, map[string]time.Time{"apiserver.crt": time.Now().Add(-time.Hour)})
	st := l.refreshed(t)
	if keys := l.diff(t, st); !slices.Equal(keys, []string{`liveExpiry["apiserver.crt"]`}) {
		t.Errorf("preview shows %v", keys)
	}
	if _, err := l.update(st); err != nil {
		t.Fatal(err)
	}
	m := l.n.mutations()
	if got := renewalCommands(m); !slices.Equal(got, []string{"init phase certs apiserver"}) {
		t.Errorf("renewed %v", got)
	}
	if len(m) != 1 || !strings.Contains(m[0], "cp -p $pki/ca.crt $pki/ca.key") || strings.Contains(m[0], "etcd/ca.key") {
		t.Errorf("commands %q, want one issuing from the cluster CA alone", m)
	}
	if len(l.pki.restarts) > 0 {
		t.Errorf("restarted %v", l.pki.restarts)
	}
	if pr := l.n.probed(); len(pr) == 0 || pr[0] != "served 10.0.0.11:6443" || pr[len(pr)-1] != "readyz 10.0.0.100:6443 as 10.0.0.100" {
		t.Errorf("probed %v", pr)
	}
}

// An apiserver that keeps serving its previous certificate past the
// reload grace is restarted, once, and waited for.
func TestStaleServedCertificateRestartsItsPod(t *testing.T) {
	l := newRenewalLab(t, map[string]time.Time{"apiserver.crt": time.Now().Add(time.Hour)})
	st := l.refreshed(t)
	l.pki.lagging[nodefacts.KubeAPIServer] = true
	if _, err := l.update(st); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.pki.restarts, []string{nodefacts.KubeAPIServer}) {
		t.Errorf("restarted %v", l.pki.restarts)
	}
}

// --renew-certificates: every certificate on the nodes asked for, whatever
// its dates, each kind the way it is renewed, and the pods that read
// theirs only at start restarted; another node's ask changes nothing here.
func TestRenewalAskedFor(t *testing.T) {
	l := newRenewalLab(t, nil)
	st := l.refreshed(t)
	configOf(l.ctx).renew = "cp-2"
	if keys := l.diff(t, st); len(keys) > 0 {
		t.Errorf("asked for cp-2, cp-1's preview shows %v", keys)
	}
	configOf(l.ctx).renew = "cp-2,cp-1"
	keys := l.diff(t, st)
	if len(keys) != len(nodefacts.Renewables) {
		t.Errorf("preview shows %v", keys)
	}
	before := maps.Clone(st.LiveExpiry)
	out, err := l.update(st)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, r := range nodefacts.Renewables {
		if r.Kubeconfig() {
			want = append(want, "certs renew "+r.Name())
		} else {
			want = append(want, "init phase certs "+r.Phase)
		}
		if out.LiveExpiry[r.Name()] == before[r.Name()] {
			t.Errorf("%s: still valid until %s", r.Name(), before[r.Name()])
		}
	}
	slices.Sort(want)
	got := renewalCommands(l.n.mutations())
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("renewed\n %v\nwant\n %v", got, want)
	}
	if !slices.Equal(l.pki.restarts, []string{nodefacts.KubeControllerManager, nodefacts.KubeScheduler}) {
		t.Errorf("restarted %v", l.pki.restarts)
	}
}

// kubeadm that exits 0 and issues nothing (an external CA: `kubeadm certs
// renew` says "can't be renewed" and succeeds) fails the update.
func TestRenewalThatDidNotHappenFails(t *testing.T) {
	l := newRenewalLab(t, map[string]time.Time{"admin.conf": time.Now().Add(time.Hour), "etcd/peer.crt": time.Now().Add(2 * time.Hour)})
	st := l.refreshed(t)
	l.pki.frozen = true
	_, err := l.update(st)
	if err == nil || !strings.Contains(err.Error(), "admin.conf was not renewed") || !strings.Contains(err.Error(), "etcd/peer.crt") {
		t.Errorf("update: %v", err)
	}
}

// A node that does not answer keeps its certificates due in its state and
// does not fail the up: the nodes after it are renewed meanwhile, and the
// next up renews it. A node that refuses the key, or one that has more to
// fix than renewals, fails as before.
func TestRenewalOnAnUnreachableNode(t *testing.T) {
	l := newRenewalLab(t, map[string]time.Time{"admin.conf": time.Now().Add(time.Hour)})
	st := l.refreshed(t)

	l.n.dialErr = unreachableErr("cp-1")
	if keys := l.diff(t, refresh(t, l.ctx, ControlPlaneAddress{}, l.in, st)); !slices.Equal(keys, []string{`liveExpiry["admin.conf"]`}) {
		t.Errorf("the last known state's preview: %v", keys)
	}
	out, err := l.update(st)
	if err != nil {
		t.Errorf("unreachable: %v", err)
	}
	if out.LiveExpiry["admin.conf"] != st.LiveExpiry["admin.conf"] || len(l.n.mutations()) > 0 {
		t.Errorf("unreachable: state %v, ran %v", out.LiveExpiry, l.n.mutations())
	}

	moved := st
	moved.LiveAdvertise = "10.0.0.120"
	if _, err := l.update(moved); err == nil {
		t.Error("an unreachable node with an address to fix passed")
	}
	if _, err := (ControlPlaneAddress{}).Create(l.ctx, infer.CreateRequest[ControlPlaneAddressArgs]{Name: "cp-1", Inputs: l.in}); err == nil {
		t.Error("a new resource on an unreachable node passed")
	}
	l.n.dialErr = keyRefusedErr("cp-1")
	if _, err := l.update(st); err == nil {
		t.Error("a refused key passed")
	}
}
