package provider

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/mapper"

	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// every is each renewable certificate at one date.
func every(at time.Time) map[string]time.Time {
	out := map[string]time.Time{}
	for _, r := range nodefacts.Renewables {
		out[r.Name()] = at
	}
	return out
}

// with is m with the named certificates at another date.
func with(m map[string]time.Time, at time.Time, names ...string) map[string]time.Time {
	m = maps.Clone(m)
	for _, n := range names {
		m[n] = at
	}
	return m
}

func TestRevivalOf(t *testing.T) {
	now := time.Date(2027, 6, 1, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	fine, soon, gone := every(now.Add(300*day)), every(now.Add(10*day)), every(now.Add(-time.Hour))
	cps := func(exp ...map[string]time.Time) []nodeCerts {
		var out []nodeCerts
		for i, e := range exp {
			out = append(out, nodeCerts{Node: "cp-" + string(rune('1'+i)), Expiry: e})
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		nodes []nodeCerts
		want  []string // the nodes revived; nil: renewed one at a time, if at all
		why   string   // a word of why
	}{
		{"all valid", cps(fine, fine, fine), nil, ""},
		{"every certificate of every node expired", cps(gone, gone, gone), []string{"cp-1", "cp-2", "cp-3"}, "no quorum"},
		// The others keep quorum and serve: cp-1 goes one at a time, with
		// its member's health waited for.
		{"one node expired", cps(gone, fine, fine), nil, ""},
		{"two of three members' peers expired; the third is left", cps(gone, gone, fine), []string{"cp-1", "cp-2"}, "peer certificates of cp-1, cp-2"},
		{"the third is due too, and renewed with them", cps(gone, gone, soon), []string{"cp-1", "cp-2", "cp-3"}, "no quorum"},
		{"quorum, but every apiserver's certificate expired", cps(with(fine, now.Add(-time.Minute), "apiserver.crt"), with(fine, now.Add(-time.Minute), "apiserver.crt"), with(fine, now.Add(-time.Minute), "apiserver-etcd-client.crt")),
			[]string{"cp-1", "cp-2", "cp-3"}, "no apiserver can serve"},
		{"etcd's serving certificates expired: no apiserver reaches its member", cps(with(fine, now.Add(-time.Minute), "etcd/server.crt"), with(fine, now.Add(-time.Minute), "etcd/server.crt"), with(fine, now.Add(-time.Minute), "etcd/server.crt")),
			[]string{"cp-1", "cp-2", "cp-3"}, "etcd/server.crt"},
		{"one apiserver still serves", cps(with(fine, now.Add(-time.Minute), "apiserver.crt"), with(fine, now.Add(-time.Minute), "apiserver.crt"), fine), nil, ""},
		// The API is served; the kubeconfigs are renewed one node at a time.
		{"only the kubeconfigs expired", cps(with(fine, now.Add(-time.Minute), "admin.conf", "super-admin.conf"), with(fine, now.Add(-time.Minute), "admin.conf"), fine), nil, ""},
		{"not built yet", cps(map[string]time.Time{}, map[string]time.Time{}, nil), nil, ""},
		{"down, but not for an expiry", cps(fine, nil, nil), nil, ""},
		// What the unread nodes do is unknown; only cp-1 can be renewed.
		{"two nodes unread, the third expired", cps(gone, nil, nil), []string{"cp-1"}, "cp-1 expired"},
		{"a single control-plane node", cps(gone), []string{"cp-1"}, "0 of 1"},
		{"five members, two expired: quorum holds", cps(gone, gone, fine, fine, fine), nil, ""},
		{"five members, three expired", cps(gone, gone, gone, fine, fine), []string{"cp-1", "cp-2", "cp-3"}, "2 of 5"},
	} {
		rv, ok := revivalOf(tc.nodes, now, 30*day)
		if ok != (tc.want != nil) || !slices.Equal(rv.names(), tc.want) {
			t.Errorf("%s: revives %v (%v), want %v", tc.name, rv.names(), ok, tc.want)
			continue
		}
		if ok && !strings.Contains(rv.Why, tc.why) {
			t.Errorf("%s: why %q, want it to say %q", tc.name, rv.Why, tc.why)
		}
		// A revived node renews everything due on it, expired or not.
		for _, n := range rv.Nodes {
			var e map[string]time.Time
			for _, nc := range tc.nodes {
				if nc.Node == n.Node {
					e = nc.Expiry
				}
			}
			if len(n.Due) != len(renewalsDue(e, now, 30*day)) || len(n.Due) == 0 {
				t.Errorf("%s: %s renews %v", tc.name, n.Node, n.Due)
			}
		}
	}
}

// revivalLab is three control-plane nodes with their certificates, the
// revival's inputs, and the probes that answer for them.
type revivalLab struct {
	lab  *fakeLab
	pkis map[string]*fakePKI
	ctx  context.Context
	in   ControlPlaneRevivalArgs
}

func newRevivalLab(t *testing.T, notAfter ...map[string]time.Time) *revivalLab {
	lab := newFakeLab(t)
	l := &revivalLab{lab: lab, pkis: map[string]*fakePKI{}}
	l.in = ControlPlaneRevivalArgs{ConfigPath: "/etc/kubernetes/kubeadm/init.yaml", Port: 6443, RenewBefore: "720h", Endpoint: "10.0.0.100:6443"}
	for i, na := range notAfter {
		name := "cp-" + string(rune('1'+i))
		n := lab.node(name)
		l.pkis[name] = newFakePKI(t, n, na)
		// The restart script is answered by the fake PKI's pkill, which
		// records each pod it names.
		l.in.Nodes = append(l.in.Nodes, lab.conn(name))
	}
	l.ctx = withProbes(lab.ctx(), fakeProbes(l.pkis))
	return l
}

func (l *revivalLab) refreshed(t *testing.T) ControlPlaneRevivalState {
	t.Helper()
	st := refresh(t, l.ctx, ControlPlaneRevival{}, l.in, ControlPlaneRevivalState{ControlPlaneRevivalArgs: l.in})
	for _, n := range l.lab.nodes {
		n.reset()
	}
	return st
}

func (l *revivalLab) diff(t *testing.T, st ControlPlaneRevivalState) []string {
	t.Helper()
	return diffKeysIn(t, l.ctx, ControlPlaneRevival{}, l.in, st)
}

func (l *revivalLab) update(st ControlPlaneRevivalState) (ControlPlaneRevivalState, error) {
	resp, err := ControlPlaneRevival{}.Update(l.ctx, infer.UpdateRequest[ControlPlaneRevivalArgs, ControlPlaneRevivalState]{ID: "control-plane", Inputs: l.in, State: st})
	return resp.Output, err
}

// firstSeq is the lab's number of the first event on any node that match
// says is one, 0 when none is.
func (l *revivalLab) firstSeq(match func(fakeEvent) bool) int {
	first := 0
	for _, n := range l.lab.nodes {
		for _, e := range n.events {
			if match(e) && (first == 0 || e.seq < first) {
				first = e.seq
			}
		}
	}
	return first
}

func (l *revivalLab) lastSeq(match func(fakeEvent) bool) int {
	last := 0
	for _, n := range l.lab.nodes {
		for _, e := range n.events {
			if match(e) && e.seq > last {
				last = e.seq
			}
		}
	}
	return last
}

func isRenewal(e fakeEvent) bool { return e.mutating && renewalCommand.MatchString(e.cmd) }
func isRestart(e fakeEvent) bool {
	return e.mutating && strings.Contains(e.cmd, "systemctl restart kubelet")
}
func isProbe(e fakeEvent) bool { return e.kind == "probe" }

// Every certificate of every node expired: the preview names each on each
// node; the update renews every node's before it restarts any control
// plane, restarts them all before it waits for any health, then waits for
// each node's etcd member, its apiserver, its components and the endpoint.
func TestRevivalRenewsEveryNodeBeforeWaiting(t *testing.T) {
	gone := every(time.Now().Add(-time.Hour).UTC().Truncate(time.Second))
	l := newRevivalLab(t, gone, gone, gone)
	st := l.refreshed(t)
	keys := l.diff(t, st)
	if len(keys) != 3*len(nodefacts.Renewables) || !slices.Contains(keys, `liveExpiry["cp-2"]["etcd/peer.crt"]`) {
		t.Errorf("preview shows %d keys: %v", len(keys), keys)
	}
	if got := st.LiveExpiry["cp-3"]["apiserver.crt"]; got != gone["apiserver.crt"].Format(time.RFC3339) {
		t.Errorf("the preview's date for cp-3's apiserver.crt: %s", got)
	}
	out, err := l.update(st)
	if err != nil {
		t.Fatal(err)
	}
	lastRenewal, firstRestart := l.lastSeq(isRenewal), l.firstSeq(isRestart)
	lastRestart, firstProbe := l.lastSeq(isRestart), l.firstSeq(isProbe)
	if lastRenewal == 0 || firstRestart == 0 || firstProbe == 0 {
		t.Fatalf("renewals %d, restarts %d, probes %d", lastRenewal, firstRestart, firstProbe)
	}
	if lastRenewal > firstRestart || lastRestart > firstProbe {
		t.Errorf("a node was restarted or waited for before every node was renewed: last renewal %d, first restart %d, last restart %d, first probe %d",
			lastRenewal, firstRestart, lastRestart, firstProbe)
	}
	var want []string
	for _, r := range nodefacts.Renewables {
		if r.Kubeconfig() {
			want = append(want, "certs renew "+r.Name())
		} else {
			want = append(want, "init phase certs "+r.Phase)
		}
	}
	slices.Sort(want)
	for _, name := range []string{"cp-1", "cp-2", "cp-3"} {
		n := l.lab.nodes[name]
		got := renewalCommands(n.mutations())
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s renewed %v", name, got)
		}
		if restarts := l.pkis[name].restarts; !slices.Equal(restarts, revivalPods) {
			t.Errorf("%s restarted %v, want %v", name, restarts, revivalPods)
		}
		pr := n.probed()
		for _, p := range []string{"etcd", "readyz " + n.addr + ":6443", "healthz 127.0.0.1:10257/healthz", "healthz 127.0.0.1:10259/livez", "readyz 10.0.0.100:6443 as 10.0.0.100"} {
			if !slices.Contains(pr, p) {
				t.Errorf("%s: never probed %s: %v", name, p, pr)
			}
		}
		for cert, v := range out.LiveExpiry[name] {
			if at, _ := time.Parse(time.RFC3339, v); !at.After(time.Now().Add(300 * 24 * time.Hour)) {
				t.Errorf("%s's %s valid until %s after the revival", name, cert, v)
			}
		}
	}
	if keys := l.diff(t, out); len(keys) > 0 {
		t.Errorf("after the revival the preview still shows %v", keys)
	}
}

// A control plane that serves is no revival's: nothing is renewed, not
// even an expired node's or a due one's (ControlPlaneAddress renews those
// one at a time), and nothing is restarted.
func TestNoRevivalWhileTheControlPlaneServes(t *testing.T) {
	now := time.Now()
	l := newRevivalLab(t, every(now.Add(-time.Hour)), every(now.Add(24*time.Hour)), nil)
	st := l.refreshed(t)
	if keys := l.diff(t, st); len(keys) > 0 {
		t.Errorf("preview shows %v", keys)
	}
	if _, err := l.update(st); err != nil {
		t.Fatal(err)
	}
	for name, n := range l.lab.nodes {
		if m, pr := n.mutations(), n.probed(); len(m) > 0 || len(pr) > 0 {
			t.Errorf("%s: ran %v, probed %v", name, m, pr)
		}
	}
}

// A node that does not answer is left out of the revival, which renews
// the two that do (a quorum again), and keeps its last known dates; it
// fails neither the refresh nor the up.
func TestRevivalLeavesOutAnUnreachableNode(t *testing.T) {
	gone := every(time.Now().Add(-time.Hour))
	l := newRevivalLab(t, gone, gone, gone)
	st := l.refreshed(t)
	l.lab.nodes["cp-3"].dialErr = unreachableErr("cp-3")
	st = refresh(t, l.ctx, ControlPlaneRevival{}, l.in, st)
	if len(st.LiveExpiry["cp-3"]) != len(nodefacts.Renewables) {
		t.Errorf("cp-3's last known dates: %v", st.LiveExpiry["cp-3"])
	}
	out, err := l.update(st)
	if err != nil {
		t.Fatal(err)
	}
	if m := l.lab.nodes["cp-3"].mutations(); len(m) > 0 {
		t.Errorf("cp-3 ran %v", m)
	}
	for _, name := range []string{"cp-1", "cp-2"} {
		if len(renewalCommands(l.lab.nodes[name].mutations())) != len(nodefacts.Renewables) {
			t.Errorf("%s was not revived: %v", name, l.lab.nodes[name].mutations())
		}
	}
	if out.LiveExpiry["cp-3"]["apiserver.crt"] != st.LiveExpiry["cp-3"]["apiserver.crt"] {
		t.Errorf("cp-3's dates were lost: %v", out.LiveExpiry["cp-3"])
	}
}

// kubeadm that exits 0 and renews nothing (an external CA) fails the
// revival, naming what it did not renew, before any restart.
func TestRevivalThatDidNotRenewFails(t *testing.T) {
	gone := every(time.Now().Add(-time.Hour))
	l := newRevivalLab(t, gone, gone, gone)
	st := l.refreshed(t)
	for _, pki := range l.pkis {
		pki.frozen = true
	}
	_, err := l.update(st)
	if err == nil || !strings.Contains(err.Error(), "apiserver.crt was not renewed") {
		t.Errorf("update: %v", err)
	}
	// Found before anything waits for a quorum that cannot come.
	for name, pki := range l.pkis {
		if len(pki.restarts) > 0 || len(l.lab.nodes[name].probed()) > 0 {
			t.Errorf("%s: restarted %v, probed %v", name, pki.restarts, l.lab.nodes[name].probed())
		}
	}
}

// The state's dates by node, then by certificate, decode as the engine
// hands them back.
func TestRevivalStateDecodes(t *testing.T) {
	var st ControlPlaneRevivalState
	state := map[string]any{"nodes": []any{map[string]any{"node": "cp-1", "host": "10.0.0.11", "privateKey": "k", "knownHosts": "/k"}},
		"configPath": "/etc/kubernetes/kubeadm/init.yaml", "port": 6443.0, "endpoint": "10.0.0.100:6443",
		"liveExpiry": map[string]any{"cp-1": map[string]any{"apiserver.crt": "2027-01-10T08:00:00Z"}}}
	if err := mapper.New(&mapper.Opts{}).Decode(state, &st); err != nil {
		t.Fatal(err)
	}
	if st.LiveExpiry["cp-1"]["apiserver.crt"] != "2027-01-10T08:00:00Z" {
		t.Errorf("decoded %v", st.LiveExpiry)
	}
}

// A stack made before the revival existed gets the resource created: its
// preview looks at the nodes (read-only) and says when the control plane
// expired; the create revives it.
func TestRevivalCreatedOnAnExpiredControlPlane(t *testing.T) {
	gone := every(time.Now().Add(-time.Hour))
	l := newRevivalLab(t, gone, gone, gone)
	log := captureLog(t)
	if _, err := (ControlPlaneRevival{}).Create(l.ctx, infer.CreateRequest[ControlPlaneRevivalArgs]{Name: "control-plane", Inputs: l.in, DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "etcd has no quorum") || !strings.Contains(log.String(), "cp-1, cp-2, cp-3") {
		t.Errorf("the preview did not say the control plane expired:\n%s", log)
	}
	for name, n := range l.lab.nodes {
		if m := n.mutations(); len(m) > 0 {
			t.Errorf("%s: the preview ran %v", name, m)
		}
	}
	out, err := ControlPlaneRevival{}.Create(l.ctx, infer.CreateRequest[ControlPlaneRevivalArgs]{Name: "control-plane", Inputs: l.in})
	if err != nil {
		t.Fatal(err)
	}
	if keys := l.diff(t, out.Output); len(keys) > 0 || len(l.pkis["cp-2"].restarts) == 0 {
		t.Errorf("after the create: preview %v, cp-2 restarted %v", keys, l.pkis["cp-2"].restarts)
	}
}
