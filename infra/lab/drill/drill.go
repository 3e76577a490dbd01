// Package drill fails nodes of a cluster built in the emulated homelab, in
// any of the ways infra/impact predicts (power-off, cut off the network,
// keepalived killed, the apiserver stopped, alone or two at once), and
// measures what the prediction says: for every consumer of an API
// address, whether its process runs and whether its address answers,
// probed from the namespace it runs in; when the API answers through the
// endpoint again; who holds the VIP, sampled throughout (two holders at
// once is a split brain); etcd's members up and healthy, its quorum, and
// whether the data can be written, only read, or not reached at all; when
// Nodes turn NotReady; and, once the failure is undone, the recovery and
// the VIP's handback.
package drill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/homelab-dev/homelab/infra/impact"
	"github.com/homelab-dev/homelab/infra/lab"
	"github.com/homelab-dev/homelab/infra/scripts/nodeprobes"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/nodefacts"
	"github.com/homelab-dev/homelab/roles/pki"
)

// Options say what to fail and for how long.
type Options struct {
	Lab       *lab.Lab
	Inventory *inventory.Inventory
	Bundle    *pki.Bundle
	// Failure is what to do to which nodes (impact.NewFailure).
	Failure impact.Failure
	// Window is how long to sample after the failure (default 15 s).
	Window time.Duration
	// Interval between samples of every consumer (default 250 ms).
	Interval time.Duration
	// Recover undoes the failure after the window and measures until every
	// consumer answers again (bounded by RecoverTimeout, default 3 min),
	// then watches the VIP's handback (vip).
	Recover        bool
	RecoverTimeout time.Duration
	// VIPBefore, when set, is where the VIP must be before the failure
	// (the prediction's holder while healthy): elsewhere, the drill would
	// measure another failure than the one predicted.
	VIPBefore string
	// VIPAfter, when set, is the holder to wait for after recovery (the
	// prediction's); the watch then lasts until it has held the VIP for
	// HandbackSettle, or HandbackTimeout (default 60 s). Unset, the watch
	// lasts until the holders have not changed for HandbackSettle
	// (default 5 s).
	VIPAfter        string
	HandbackTimeout time.Duration
	HandbackSettle  time.Duration
	// Progress gets each event as it happens (nil: none).
	Progress io.Writer
}

// Consumer is a consumer as found on the live cluster.
type Consumer struct {
	ID, Kind, Node, Address string
}

// Event is one change seen during the drill.
type Event struct {
	At   time.Duration `json:"at"`
	What string        `json:"what"`
}

// Result is one drill's measurements.
type Result struct {
	Layout    string         `json:"layout"`
	Failure   impact.Failure `json:"failure"`
	Consumers []Consumer     `json:"consumers"`
	// Cells are each consumer's state at the end of the window: impact.OK,
	// impact.Down, impact.Gone (its process does not run), or impact.NA
	// for every consumer when the failure cannot be made (NotApplicable).
	Cells         map[string]string `json:"cells"`
	NotApplicable string            `json:"notApplicable,omitempty"`
	// Effective is when the failure took effect: the apiserver stopped
	// answering on its own node (apiserver), the injection done (the
	// others).
	Effective time.Duration `json:"effective"`
	// Failover is when the API answered through the endpoint again, for
	// good, after the failure (0: it never stopped; -1: not within the
	// window).
	// EndpointUnknown is set when the endpoint is a name the lab cannot
	// resolve (dns).
	Failover        time.Duration `json:"failover"`
	EndpointUnknown bool          `json:"endpointUnknown,omitempty"`
	// Silent is how long the endpoint did not answer before it was back
	// (a killed keepalived's VIP answers until the new master takes it).
	Silent time.Duration `json:"silent,omitempty"`
	// VIPHolder is the node the LAN reaches through the VIP at the end of
	// the window (the gateway's neighbour entry for it), VIPHolders every
	// node with the VIP on an interface then (vip only); Splits every
	// stretch with two holders or more, over the whole drill.
	VIPHolder  string   `json:"vipHolder,omitempty"`
	VIPHolders []string `json:"vipHolders,omitempty"`
	Splits     []Split  `json:"splits,omitempty"`
	// VIPMoved is when, within the window, another node than the holder
	// before the failure first had the VIP (-1: none did; vip only).
	VIPMoved time.Duration `json:"vipMoved,omitempty"`
	// EtcdUp counts members answering on the network at the end of the
	// window, EtcdHealthy those whose /health is true; Quorum is whether a
	// majority of the members follow one leader.
	EtcdUp      int  `json:"etcdUp"`
	EtcdHealthy int  `json:"etcdHealthy"`
	Quorum      bool `json:"quorum"`
	// Writable: a ConfigMap update succeeded through some apiserver at the
	// end of the window. Data: impact.DataWritable, DataReadOnly (no write,
	// but a member answered a serializable read of the drill's ConfigMap)
	// or DataUnavailable.
	Writable bool   `json:"writable"`
	Data     string `json:"data"`
	// NotReady is when each Node was first seen NotReady.
	NotReady map[string]time.Duration `json:"notReady,omitempty"`
	// Restored is when the failure was undone; Recovery how long from then
	// until every consumer and etcd member answered.
	Restored time.Duration `json:"restored,omitempty"`
	Recovery time.Duration `json:"recovery,omitempty"`
	Handback *Handback     `json:"handback,omitempty"`
	Timeline []Event       `json:"timeline"`
	// EndpointSamples and HolderSamples are the raw samples behind
	// Failover, Splits and Handback.
	EndpointSamples []Sample `json:"endpointSamples,omitempty"`
	HolderSamples   []Sample `json:"holderSamples,omitempty"`
}

func (o *Options) defaults() {
	if o.Window == 0 {
		o.Window = 15 * time.Second
	}
	if o.Interval == 0 {
		o.Interval = 250 * time.Millisecond
	}
	if o.RecoverTimeout == 0 {
		o.RecoverTimeout = 3 * time.Minute
	}
	if o.HandbackTimeout == 0 {
		o.HandbackTimeout = time.Minute
	}
	if o.HandbackSettle == 0 {
		o.HandbackSettle = 5 * time.Second
	}
}

// ErrNotReady wraps what was wrong before the failure: the cluster was not
// (yet) in the shape the drill starts from; trying again later may do.
type ErrNotReady struct{ Err error }

func (e *ErrNotReady) Error() string { return "before the drill, " + e.Err.Error() }
func (e *ErrNotReady) Unwrap() error { return e.Err }

// Run runs one drill. The cluster must be built and healthy.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.defaults()
	inv := o.Inventory
	for _, n := range o.Failure.Nodes {
		if _, ok := inv.Node(n); !ok {
			return nil, fmt.Errorf("--fail: %q is not a node of the inventory", n)
		}
	}
	p, err := newProber(o.Bundle, o.Lab.Names())
	if err != nil {
		return nil, err
	}
	cons, admin, err := Discover(ctx, o.Lab, inv)
	if err != nil {
		return nil, err
	}
	r := &Result{Layout: inv.Cluster.Endpoint.Layout, Failure: o.Failure, Consumers: cons, Cells: map[string]string{}, NotReady: map[string]time.Duration{}}
	s := &sampler{o: o, p: p, inv: inv, cons: cons, admin: admin, res: r, state: map[string]string{}, history: map[string][]string{}}
	if err := s.before(ctx); err != nil {
		return nil, err
	}
	inj := injectorFor(o)
	s.start = time.Now()
	stopWatch := s.watch(ctx)
	defer stopWatch()
	na, err := inj.fail(ctx, s)
	if err != nil {
		inj.restore(context.WithoutCancel(ctx), s)
		return nil, err
	}
	r.NotApplicable = na
	if r.Effective == 0 {
		r.Effective = time.Since(s.start)
	}
	s.run(ctx, s.start.Add(o.Window), false)
	for _, c := range cons {
		r.Cells[c.ID] = s.settled(c.ID)
		if na != "" {
			r.Cells[c.ID] = impact.NA
		}
	}
	s.mu.Lock()
	r.EtcdUp, r.EtcdHealthy, r.Quorum, r.Writable = s.etcdUp, s.etcdHealthy, s.quorum, s.writable
	r.Data = dataState(s.writable, s.readable)
	s.mu.Unlock()
	end := time.Since(s.start)
	if s.watchesHolders() {
		r.VIPHolders = holderAt(s.holderSamples(), end)
		if r.VIPHolder, err = o.Lab.Reaches(inv.Cluster.Endpoint.VIP); err != nil {
			s.event("who the gateway reaches through the VIP: " + err.Error())
		}
	}
	if ctx.Err() != nil {
		// Interrupted: undo the failure all the same, rather than leave a
		// node cut off or a manifest parked.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		s.finish(stopWatch, end)
		return r, errors.Join(ctx.Err(), inj.restore(rctx, s))
	}
	if !o.Recover {
		s.finish(stopWatch, end)
		return r, nil
	}
	restore := time.Now()
	r.Restored = restore.Sub(s.start)
	if err := inj.restore(context.WithoutCancel(ctx), s); err != nil {
		s.finish(stopWatch, end)
		return r, err
	}
	if !s.run(ctx, restore.Add(o.RecoverTimeout), true) {
		s.finish(stopWatch, end)
		return r, fmt.Errorf("%s: not every consumer and etcd member answered within %s of the restore", o.Failure.ID, o.RecoverTimeout)
	}
	r.Recovery = time.Since(restore)
	s.event("recovered: every consumer and etcd member answers")
	if s.watchesHolders() {
		s.awaitHandback(ctx)
	}
	s.finish(stopWatch, end)
	if s.watchesHolders() {
		r.Handback = handback(r.HolderSamples, r.EndpointSamples, r.Restored)
	}
	return r, nil
}

func dataState(writable, readable bool) string {
	switch {
	case writable:
		return impact.DataWritable
	case readable:
		return impact.DataReadOnly
	}
	return impact.DataUnavailable
}

// probe checks one consumer from where it runs.
func (p *prober) probe(ctx context.Context, c Consumer, timeout time.Duration) error {
	ns := p.names.Gateway()
	if c.Node != "" {
		ns = p.names.Node(c.Node)
	}
	if c.Kind == impact.KindEtcd {
		return p.etcdHealth(ctx, nsDial(ns), c.Address, timeout)
	}
	return p.readyz(ctx, nsDial(ns), c.Address, timeout)
}

// program is the process a consumer is, and the static pod manifest the
// kubelet runs it from ("" for the kubelet itself).
func program(c Consumer) (prog, manifest string) {
	switch c.Kind {
	case impact.KindKubelet:
		return "kubelet", ""
	case impact.KindControllerManager:
		return nodefacts.KubeControllerManager, nodefacts.Manifest(nodefacts.KubeControllerManager)
	case impact.KindScheduler:
		return nodefacts.KubeScheduler, nodefacts.Manifest(nodefacts.KubeScheduler)
	case impact.KindEtcd:
		return nodefacts.KubeAPIServer, nodefacts.Manifest(nodefacts.KubeAPIServer) // the apiserver is the client of its etcd
	}
	return "", ""
}

// measure is one consumer's state now. Gone: its process does not run and
// nothing will run it again (its node is off, its static pod's manifest
// removed). A static pod whose manifest is there but whose process is
// not (the controller-manager exits when it loses its leader lease, and
// the kubelet restarts it) is measured at its address like a running one.
func (s *sampler) measure(ctx context.Context, c Consumer, procs map[string][]string) string {
	if c.Node != "" {
		prog, manifest := program(c)
		switch {
		case len(procs[c.Node]) == 0:
			return impact.Gone // powered off: nothing runs on the node
		case prog == "" || slices.Contains(procs[c.Node], prog):
		case manifest == "":
			return impact.Gone
		default:
			if ok, err := s.o.Lab.NodeHasFile(c.Node, manifest); err == nil && !ok {
				return impact.Gone
			}
		}
	}
	if err := s.p.probe(ctx, c, 800*time.Millisecond); err != nil {
		return impact.Down
	}
	return impact.OK
}

type sampler struct {
	o     Options
	p     *prober
	inv   *inventory.Inventory
	cons  []Consumer
	admin *rest.Config
	res   *Result
	start time.Time

	mu          sync.Mutex
	state       map[string]string   // consumer -> last state
	history     map[string][]string // consumer -> recent states
	etcdUp      int
	etcdHealthy int
	quorum      bool
	readable    bool
	writable    bool
	lastWrite   time.Time
	wroteOnce   bool
	endpoint    []Sample
	holders     []Sample
}

func (s *sampler) event(what string) {
	s.mu.Lock()
	at := time.Since(s.start)
	if s.start.IsZero() {
		at = 0
	}
	s.res.Timeline = append(s.res.Timeline, Event{At: at, What: what})
	s.mu.Unlock()
	if s.o.Progress != nil {
		fmt.Fprintf(s.o.Progress, "  %7s  %s\n", secs(at), what)
	}
}

func (s *sampler) watchesHolders() bool {
	return s.inv.Cluster.Endpoint.Layout == inventory.LayoutVIP
}

// before checks the cluster is in the shape the drill starts from: every
// consumer answers, the drill's ConfigMap is written (a read-only cluster
// is told by reading it back), and the VIP is where it should be.
func (s *sampler) before(ctx context.Context) error {
	for _, c := range s.cons {
		if err := s.p.probe(ctx, c, time.Second); err != nil {
			return &ErrNotReady{fmt.Errorf("%s (%s) does not answer: %w", c.ID, c.Address, err)}
		}
	}
	if !s.write(ctx) {
		return &ErrNotReady{fmt.Errorf("the drill's ConfigMap %s cannot be written", probeConfigMap)}
	}
	// A Node still NotReady from the previous drill (its kubelet reports
	// again only every few seconds) would count as this drill's.
	if notReady, err := s.notReadyNodes(ctx); err != nil || len(notReady) > 0 {
		return &ErrNotReady{fmt.Errorf("Nodes not Ready: %v %v", notReady, err)}
	}
	if s.watchesHolders() {
		h, err := s.o.Lab.Holders(s.inv.Cluster.Endpoint.VIP)
		if err != nil {
			return err
		}
		if len(h) != 1 || (s.o.VIPBefore != "" && h[0] != s.o.VIPBefore) {
			return &ErrNotReady{fmt.Errorf("the VIP is on %v, not on %s alone", h, s.o.VIPBefore)}
		}
	}
	return nil
}

// watch samples the endpoint and the VIP's holders every 50 ms from now
// until the returned stop is called: failover and handback are measured
// to a tenth of a second, not to the consumers' sample interval.
func (s *sampler) watch(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if host := s.inv.EndpointHost(); net.ParseIP(host) != nil {
		addr := net.JoinHostPort(host, fmt.Sprint(s.inv.Cluster.Endpoint.Port))
		dial := nsDial(s.p.names.Gateway())
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev, first := false, true
			for ctx.Err() == nil {
				t := time.Now()
				err := s.p.readyz(ctx, dial, addr, 300*time.Millisecond)
				if ctx.Err() != nil {
					return // the watch ended mid-request: no answer to record
				}
				ok := err == nil
				s.mu.Lock()
				s.endpoint = append(s.endpoint, Sample{At: t.Sub(s.start), Answers: ok})
				s.mu.Unlock()
				if first || ok != prev {
					if !first || !ok {
						s.event(map[bool]string{true: "endpoint answers again", false: "endpoint stops answering"}[ok])
					}
					prev, first = ok, false
				}
				time.Sleep(50*time.Millisecond - time.Since(t))
			}
		}()
	} else {
		s.res.EndpointUnknown = true
	}
	if s.watchesHolders() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var prev []string
			first := true
			for ctx.Err() == nil {
				t := time.Now()
				h, err := s.o.Lab.Holders(s.inv.Cluster.Endpoint.VIP)
				if err == nil {
					s.mu.Lock()
					s.holders = append(s.holders, Sample{At: t.Sub(s.start), Holders: h})
					s.mu.Unlock()
					if first || !slices.Equal(h, prev) {
						what := "VIP on " + strings.Join(h, " and ")
						switch {
						case len(h) == 0:
							what = "VIP on no node"
						case len(h) > 1:
							what += ": SPLIT BRAIN"
						}
						s.event(what)
						prev, first = h, false
					}
				}
				time.Sleep(50*time.Millisecond - time.Since(t))
			}
		}()
	}
	var once sync.Once
	return func() { once.Do(func() { cancel(); wg.Wait() }) }
}

func (s *sampler) holderSamples() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.holders)
}

// finish stops the watch and derives the endpoint and VIP figures.
func (s *sampler) finish(stop func(), windowEnd time.Duration) {
	stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.res
	r.EndpointSamples, r.HolderSamples = s.endpoint, s.holders
	if !r.EndpointUnknown {
		down, back := failover(s.endpoint, 0, windowEnd)
		r.Failover = back
		if back > 0 {
			r.Silent = back - down
		}
	}
	r.Splits = splits(s.holders, time.Duration(s.inv.Cluster.VRRP.AdvertIntervalMs)*time.Millisecond)
	if len(s.holders) > 0 {
		r.VIPMoved = vipMoved(s.holders, strings.Join(holderAt(s.holders, 0), " "), windowEnd)
	}
}

// awaitHandback watches the VIP after recovery: until the expected holder
// has held it alone for HandbackSettle, or (no expectation) until nothing
// changed for that long; at most HandbackTimeout.
func (s *sampler) awaitHandback(ctx context.Context) {
	deadline := time.Now().Add(s.o.HandbackTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		h := s.holderSamples()
		if len(h) == 0 {
			continue
		}
		last := h[len(h)-1]
		if s.o.VIPAfter != "" && !slices.Equal(last.Holders, []string{s.o.VIPAfter}) {
			continue
		}
		since := last.At
		for i := len(h) - 1; i >= 0 && slices.Equal(h[i].Holders, last.Holders); i-- {
			since = h[i].At
		}
		if last.At-since >= s.o.HandbackSettle {
			return
		}
	}
	s.event(fmt.Sprintf("handback: the VIP did not settle within %s", s.o.HandbackTimeout))
}

// settled is a consumer's state over its last three samples: one state
// throughout, or down while it still changes.
func (s *sampler) settled(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.history[id]
	if len(h) == 0 {
		return impact.Down
	}
	if len(h) > 3 {
		h = h[len(h)-3:]
	}
	for _, st := range h {
		if st != h[len(h)-1] {
			return impact.Down
		}
	}
	return h[len(h)-1]
}

// run samples until deadline; with untilHealthy it stops (true) as soon as
// every consumer and etcd member answers.
func (s *sampler) run(ctx context.Context, deadline time.Time, untilHealthy bool) bool {
	for time.Now().Before(deadline) && ctx.Err() == nil {
		tick := time.Now()
		procs, err := s.o.Lab.Processes()
		if err != nil {
			s.event("listing the nodes' processes: " + err.Error())
		}
		var wg sync.WaitGroup
		for _, c := range s.cons {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.record(c.ID, s.measure(ctx, c, procs))
			}()
		}
		wg.Add(1)
		go func() { defer wg.Done(); s.sampleEtcd(ctx) }()
		if time.Since(s.lastWrite) >= time.Second {
			s.lastWrite = time.Now()
			wg.Add(2)
			go func() { defer wg.Done(); s.sampleWrite(ctx) }()
			go func() { defer wg.Done(); s.sampleNodes(ctx) }()
		}
		wg.Wait()
		if untilHealthy && s.allHealthy() {
			return true
		}
		if d := s.o.Interval - time.Since(tick); d > 0 {
			time.Sleep(d)
		}
	}
	return false
}

func (s *sampler) record(id, st string) {
	s.mu.Lock()
	prev, seen := s.state[id]
	s.state[id] = st
	s.history[id] = append(s.history[id], st)
	s.mu.Unlock()
	if !seen && st == impact.OK {
		return
	}
	if prev != st {
		s.event(fmt.Sprintf("%s: %s", id, st))
	}
}

func (s *sampler) allHealthy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.cons {
		if s.state[c.ID] != impact.OK {
			return false
		}
	}
	return s.etcdHealthy == len(s.inv.ControlPlanes())
}

// sampleEtcd asks every member, from the LAN: /health (answering at all
// counts it up; "true" healthy), its status (whose leader it follows: a
// majority following one leader is a quorum), and a serializable read of
// the drill's ConfigMap (data that can still be read without a quorum).
func (s *sampler) sampleEtcd(ctx context.Context) {
	cps := s.inv.ControlPlanes()
	type answer struct {
		up, healthy, read bool
		leader            string
	}
	answers := make([]answer, len(cps))
	var wg sync.WaitGroup
	for i, n := range cps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dial := nsDial(s.p.names.Gateway())
			addr := net.JoinHostPort(n.Address, "2379")
			a := &answers[i]
			err := s.p.etcdHealth(ctx, dial, addr, 800*time.Millisecond)
			a.healthy = err == nil
			a.up = err == nil || isHTTPError(err)
			if !a.up {
				return
			}
			a.leader, _ = s.p.etcdLeader(ctx, dial, addr, 800*time.Millisecond)
			a.read = s.p.etcdReadable(ctx, dial, addr, probeKey, 800*time.Millisecond) == nil
		}()
	}
	wg.Wait()
	up, healthy, readable := 0, 0, false
	follow := map[string]int{}
	for _, a := range answers {
		if a.up {
			up++
		}
		if a.healthy {
			healthy++
		}
		if a.leader != "" {
			follow[a.leader]++
		}
		readable = readable || a.read
	}
	quorum := false
	for _, n := range follow {
		quorum = quorum || 2*n > len(cps)
	}
	s.mu.Lock()
	changed := up != s.etcdUp || healthy != s.etcdHealthy || quorum != s.quorum
	s.etcdUp, s.etcdHealthy, s.quorum, s.readable = up, healthy, quorum, readable
	s.mu.Unlock()
	if changed {
		q := "quorum"
		if !quorum {
			q = "NO QUORUM"
		}
		s.event(fmt.Sprintf("etcd: %d/%d members healthy, %d answer, %s", healthy, len(cps), up, q))
	}
}

// apiCallTimeout bounds one API call, retries included: client-go honours
// an apiserver's Retry-After up to ten times, and an apiserver without
// etcd quorum kept a call waiting for minutes that way.
const apiCallTimeout = time.Second

// clientFor is the admin kubeconfig aimed at one address.
func (s *sampler) clientFor(host string) (*kubernetes.Clientset, error) {
	cfg := rest.CopyConfig(s.admin)
	cfg.Host = "https://" + net.JoinHostPort(host, fmt.Sprint(s.inv.Cluster.Endpoint.Port))
	cfg.TLSClientConfig.ServerName = host
	cfg.Timeout = apiCallTimeout
	cfg.Dial = nsDial(s.p.names.Gateway())
	return kubernetes.NewForConfig(cfg)
}

// servers are the addresses a write or a Node list may go through: the
// endpoint, then every control-plane node's own.
func (s *sampler) servers() []string {
	out := []string{s.inv.EndpointHost()}
	for _, n := range s.inv.ControlPlanes() {
		if n.Address != out[0] {
			out = append(out, n.Address)
		}
	}
	return out
}

const (
	probeConfigMap = "homelab-drill"
	probeKey       = "/registry/configmaps/default/" + probeConfigMap
)

// write updates (or creates) the drill's ConfigMap through every server at
// once; true when one took it.
func (s *sampler) write(ctx context.Context) bool {
	var ok sync.Once
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, h := range s.servers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs, err := s.clientFor(h)
			if err != nil {
				return
			}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: probeConfigMap, Namespace: "default"}, Data: map[string]string{"at": time.Now().Format(time.RFC3339Nano), "via": h}}
			cctx, cancel := context.WithTimeout(ctx, 2*apiCallTimeout)
			defer cancel()
			if _, err = cs.CoreV1().ConfigMaps("default").Update(cctx, cm, metav1.UpdateOptions{}); err != nil {
				_, err = cs.CoreV1().ConfigMaps("default").Create(cctx, cm, metav1.CreateOptions{})
			}
			if err == nil {
				ok.Do(func() { close(done) })
			}
		}()
	}
	wg.Wait()
	select {
	case <-done:
		return true
	default:
		return false
	}
}

func (s *sampler) sampleWrite(ctx context.Context) {
	ok := s.write(ctx)
	s.mu.Lock()
	prev, first := s.writable, !s.wroteOnce
	s.writable, s.wroteOnce = ok, true
	s.mu.Unlock()
	if prev != ok || (first && !ok) {
		s.event(fmt.Sprintf("writes: %v", map[bool]string{true: "succeed", false: "FAIL"}[ok]))
	}
}

// notReadyNodes lists the Nodes whose Ready condition is not True, read
// through the first server that answers.
func (s *sampler) notReadyNodes(ctx context.Context) ([]string, error) {
	err := fmt.Errorf("no apiserver lists the Nodes")
	for _, h := range s.servers() {
		cs, cerr := s.clientFor(h)
		if cerr != nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, apiCallTimeout)
		nodes, lerr := cs.CoreV1().Nodes().List(cctx, metav1.ListOptions{})
		cancel()
		if lerr != nil {
			err = lerr
			continue
		}
		var out []string
		for _, n := range nodes.Items {
			ready := false
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready = true
				}
			}
			if !ready {
				out = append(out, n.Name)
			}
		}
		return out, nil
	}
	return nil, err
}

func (s *sampler) sampleNodes(ctx context.Context) {
	notReady, err := s.notReadyNodes(ctx)
	if err != nil {
		return
	}
	for _, n := range notReady {
		s.mu.Lock()
		_, seen := s.res.NotReady[n]
		if !seen {
			s.res.NotReady[n] = time.Since(s.start)
		}
		s.mu.Unlock()
		if !seen {
			s.event("Node " + n + " NotReady")
		}
	}
}

// Discover reads, from the live cluster, the address every consumer dials:
// each node's kubeconfigs and apiserver manifest over SSH, cluster-info and
// kube-proxy's kubeconfig through the API. It returns the admin client
// config (admin.conf from the first control-plane node) as well.
func Discover(ctx context.Context, l *lab.Lab, inv *inventory.Inventory) ([]Consumer, *rest.Config, error) {
	first := inv.ControlPlanes()[0].Name
	adminConf, err := l.Run(ctx, first, "cat /etc/kubernetes/admin.conf")
	if err != nil {
		return nil, nil, fmt.Errorf("%s: admin.conf: %w", first, err)
	}
	admin, err := clientcmd.RESTConfigFromKubeConfig([]byte(adminConf))
	if err != nil {
		return nil, nil, err
	}
	var out []Consumer
	out = append(out, Consumer{ID: "kubectl", Kind: impact.KindKubectl, Address: hostPort(admin.Host)})
	cfg := rest.CopyConfig(admin)
	cfg.Dial = nsDial(l.Names().Gateway())
	cfg.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	ci, err := cs.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("cluster-info: %w", err)
	}
	ciServer, err := kubeconfigServer(ci.Data["kubeconfig"])
	if err != nil {
		return nil, nil, fmt.Errorf("cluster-info: %w", err)
	}
	out = append(out, Consumer{ID: "cluster-info", Kind: impact.KindClusterInfo, Address: ciServer})

	var etcd []Consumer
	var cms, scheds []Consumer
	for _, n := range inv.Nodes {
		txt, err := l.Run(ctx, n.Name, nodeprobes.Probe().String())
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", n.Name, err)
		}
		live := nodefacts.ParseProbe(txt)
		server := func(kubeconfig string) (string, bool) {
			s := live.Kubeconfigs[kubeconfig]
			return hostPort(s), s != ""
		}
		if addr, ok := server(nodefacts.KubeletConf); ok {
			out = append(out, Consumer{ID: "kubelet/" + n.Name, Kind: impact.KindKubelet, Node: n.Name, Address: addr})
		}
		if addr, ok := server(nodefacts.ControllerManagerConf); ok {
			cms = append(cms, Consumer{ID: "controller-manager/" + n.Name, Kind: impact.KindControllerManager, Node: n.Name, Address: addr})
		}
		if addr, ok := server(nodefacts.SchedulerConf); ok {
			scheds = append(scheds, Consumer{ID: "scheduler/" + n.Name, Kind: impact.KindScheduler, Node: n.Name, Address: addr})
		}
		if f, ok := live.Flags(nodefacts.KubeAPIServer); ok && f["etcd-servers"] != "" {
			addr := hostPort(strings.Split(f["etcd-servers"], ",")[0])
			etcd = append(etcd, Consumer{ID: "apiserver-etcd/" + n.Name, Kind: impact.KindEtcd, Node: n.Name, Address: addr})
		}
	}
	for i := range cms {
		out = append(out, cms[i], scheds[i])
	}
	if inv.Cluster.KubeProxy.Replacement == inventory.ReplacementNone {
		kp, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("kube-proxy ConfigMap: %w", err)
		}
		server, err := kubeconfigServer(kp.Data["kubeconfig.conf"])
		if err != nil {
			return nil, nil, fmt.Errorf("kube-proxy ConfigMap: %w", err)
		}
		out = append(out, Consumer{ID: "kube-proxy", Kind: impact.KindKubeProxy, Address: server})
	}
	out = append(out, etcd...)
	return out, admin, nil
}

// kubeconfigServer returns the one cluster's server as host:port.
func kubeconfigServer(kc string) (string, error) {
	cfg, err := clientcmd.Load([]byte(kc))
	if err != nil {
		return "", err
	}
	var servers []string
	for _, c := range cfg.Clusters {
		servers = append(servers, hostPort(c.Server))
	}
	sort.Strings(servers)
	if len(servers) == 0 {
		return "", fmt.Errorf("no cluster in the kubeconfig")
	}
	return servers[0], nil
}

func hostPort(url string) string {
	s := strings.TrimPrefix(url, "https://")
	return strings.TrimSuffix(s, "/")
}
