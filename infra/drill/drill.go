// Package drill fails a node of a cluster built in the emulated homelab and
// measures what roles/impact predicts: for every consumer of an API
// address, whether its address still answers, probed from the namespace it
// runs in; the VIP's failover; etcd's health and quorum; whether writes
// succeed; when Nodes turn NotReady; and the recovery once the node is
// powered on again.
package drill

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/homelab-dev/homelab/infra/lab"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/impact"
	"github.com/homelab-dev/homelab/roles/pki"
)

// Options say what to fail and for how long.
type Options struct {
	Lab       *lab.Lab
	Inventory *inventory.Inventory
	Bundle    *pki.Bundle
	// Fail is the node to power off.
	Fail string
	// Window is how long to sample after the power-off (default 15 s).
	Window time.Duration
	// Interval between samples of every consumer (default 250 ms).
	Interval time.Duration
	// Recover powers the node on after the window and measures until every
	// consumer answers again (bounded by RecoverTimeout, default 3 min).
	Recover        bool
	RecoverTimeout time.Duration
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
	Layout    string     `json:"layout"`
	Failed    string     `json:"failed"`
	Consumers []Consumer `json:"consumers"`
	// Cells are each consumer's state at the end of the window:
	// impact.OK, impact.Down or impact.Gone.
	Cells map[string]string `json:"cells"`
	// VIPFailover is when the API answered through the VIP again after
	// the power-off (0: it never stopped; -1: it never came back; vip only).
	VIPFailover time.Duration `json:"vipFailover"`
	VIPHolder   string        `json:"vipHolder,omitempty"`
	// EtcdHealthy counts members answering /health at the end; Quorum is
	// whether any member could do a quorum read.
	EtcdHealthy int  `json:"etcdHealthy"`
	Quorum      bool `json:"quorum"`
	// Writable: a ConfigMap update succeeded through some apiserver at the
	// end of the window.
	Writable bool `json:"writable"`
	// NotReady is when each Node was first seen NotReady.
	NotReady map[string]time.Duration `json:"notReady,omitempty"`
	// Recovery is from power-on until every consumer and etcd member answered.
	Recovery time.Duration `json:"recovery,omitempty"`
	Timeline []Event       `json:"timeline"`
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
}

// Run runs one drill. The cluster must be built and healthy.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.defaults()
	inv := o.Inventory
	if _, ok := inv.Node(o.Fail); !ok {
		return nil, fmt.Errorf("--fail: %q is not a node of the inventory", o.Fail)
	}
	p, err := newProber(o.Bundle)
	if err != nil {
		return nil, err
	}
	cons, admin, err := Discover(ctx, o.Lab, inv)
	if err != nil {
		return nil, err
	}
	r := &Result{Layout: inv.Cluster.Endpoint.Layout, Failed: o.Fail, Consumers: cons, Cells: map[string]string{}, NotReady: map[string]time.Duration{}}
	// Everything must answer before the failure, or the drill measures an
	// older one.
	for _, c := range cons {
		if err := p.probe(ctx, c, time.Second); err != nil {
			return nil, fmt.Errorf("before the drill, %s (%s) does not answer: %w", c.ID, c.Address, err)
		}
	}
	s := &sampler{o: o, p: p, inv: inv, cons: cons, admin: admin, res: r, state: map[string]string{}}
	start := time.Now()
	s.start = start
	if err := o.Lab.PowerOff(o.Fail); err != nil {
		return nil, err
	}
	s.event("power-off " + o.Fail)
	s.off = map[string]bool{o.Fail: true}
	s.run(ctx, start.Add(o.Window), false)
	for _, c := range cons {
		r.Cells[c.ID] = s.settled(c.ID)
	}
	r.EtcdHealthy, r.Quorum, r.Writable, r.VIPHolder = s.etcdHealthy, s.quorum, s.writable, s.holder()
	r.VIPFailover = s.vipFailover
	if !o.Recover {
		return r, nil
	}
	on := time.Now()
	if err := o.Lab.PowerOn(ctx, o.Fail); err != nil {
		return r, err
	}
	s.off = map[string]bool{}
	s.event("power-on " + o.Fail + " (booted)")
	if !s.run(ctx, on.Add(o.RecoverTimeout), true) {
		return r, fmt.Errorf("%s: not every consumer and etcd member answered within %s of power-on", o.Fail, o.RecoverTimeout)
	}
	r.Recovery = time.Since(on)
	s.event("recovered: every consumer and etcd member answers")
	return r, nil
}

// probe checks one consumer from where it runs.
func (p *prober) probe(ctx context.Context, c Consumer, timeout time.Duration) error {
	ns := lab.GatewayNetns
	if c.Node != "" {
		ns = "hl-" + c.Node
	}
	if c.Kind == impact.KindEtcd {
		return p.etcdHealth(ctx, nsDial(ns), c.Address, timeout)
	}
	return p.readyz(ctx, nsDial(ns), c.Address, timeout)
}

type sampler struct {
	o     Options
	p     *prober
	inv   *inventory.Inventory
	cons  []Consumer
	admin *rest.Config
	res   *Result
	start time.Time
	off   map[string]bool

	mu          sync.Mutex
	state       map[string]string   // consumer -> last state
	history     map[string][]string // consumer -> recent states
	etcdHealthy int
	quorum      bool
	writable    bool
	vipDown     bool
	vipFailover time.Duration
	lastWrite   time.Time
}

func (s *sampler) event(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.res.Timeline = append(s.res.Timeline, Event{At: time.Since(s.start), What: what})
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
	if s.history == nil {
		s.history = map[string][]string{}
	}
	vipCtx, stopVIP := context.WithCancel(ctx)
	var vipWG sync.WaitGroup
	if s.inv.Cluster.Endpoint.Layout == inventory.LayoutVIP && !untilHealthy {
		vipWG.Add(1)
		go func() { defer vipWG.Done(); s.watchVIP(vipCtx) }()
	}
	defer func() { stopVIP(); vipWG.Wait() }()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		tick := time.Now()
		var wg sync.WaitGroup
		for _, c := range s.cons {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st := impact.OK
				if c.Node != "" && s.off[c.Node] {
					st = impact.Gone
				} else if err := s.p.probe(ctx, c, 800*time.Millisecond); err != nil {
					st = impact.Down
				}
				s.record(c.ID, st)
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

// watchVIP asks /readyz through the VIP from the gateway every 50 ms with a
// short timeout: failover is measured to a tenth of a second, not to the
// sample interval.
func (s *sampler) watchVIP(ctx context.Context) {
	addr := net.JoinHostPort(s.inv.Cluster.Endpoint.VIP, fmt.Sprint(s.inv.Cluster.Endpoint.Port))
	dial := nsDial(lab.GatewayNetns)
	for ctx.Err() == nil {
		t := time.Now()
		err := s.p.readyz(ctx, dial, addr, 300*time.Millisecond)
		if ctx.Err() != nil {
			break // the window closed mid-request: that is no answer from the VIP
		}
		s.mu.Lock()
		switch {
		case err != nil && !s.vipDown && s.vipFailover == 0:
			s.vipDown = true
			s.mu.Unlock()
			s.event("VIP stops answering")
			s.mu.Lock()
		case err == nil && s.vipDown:
			s.vipDown = false
			s.vipFailover = t.Sub(s.start)
			s.mu.Unlock()
			s.event("VIP answers again")
			s.mu.Lock()
		}
		s.mu.Unlock()
		time.Sleep(50*time.Millisecond - time.Since(t))
	}
	s.mu.Lock()
	if s.vipDown {
		s.vipFailover = -1
	}
	s.mu.Unlock()
}

func (s *sampler) holder() string {
	if s.inv.Cluster.Endpoint.Layout != inventory.LayoutVIP {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, n := range s.inv.ControlPlanes() {
		if s.off[n.Name] {
			continue
		}
		out, err := s.o.Lab.Run(ctx, n.Name, "ip -o addr show | grep -wc "+s.inv.Cluster.Endpoint.VIP+" || true")
		if err == nil && strings.TrimSpace(out) != "0" {
			return n.Name
		}
	}
	return ""
}

func (s *sampler) sampleEtcd(ctx context.Context) {
	healthy := 0
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range s.inv.ControlPlanes() {
		if s.off[n.Name] {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.p.etcdHealth(ctx, nsDial(lab.GatewayNetns), net.JoinHostPort(n.Address, "2379"), 800*time.Millisecond) == nil {
				mu.Lock()
				healthy++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	s.mu.Lock()
	prev := s.etcdHealthy
	s.etcdHealthy, s.quorum = healthy, healthy > 0
	s.mu.Unlock()
	if prev != healthy {
		s.event(fmt.Sprintf("etcd: %d/%d members healthy", healthy, len(s.inv.ControlPlanes())))
	}
}

// clientFor is the admin kubeconfig aimed at one address.
func (s *sampler) clientFor(host string) (*kubernetes.Clientset, error) {
	cfg := rest.CopyConfig(s.admin)
	cfg.Host = "https://" + net.JoinHostPort(host, fmt.Sprint(s.inv.Cluster.Endpoint.Port))
	cfg.TLSClientConfig.ServerName = host
	cfg.Timeout = 900 * time.Millisecond
	cfg.Dial = nsDial(lab.GatewayNetns)
	return kubernetes.NewForConfig(cfg)
}

// servers are the addresses a write or a Node list may go through: the
// endpoint, then every control-plane node's own.
func (s *sampler) servers() []string {
	out := []string{s.inv.EndpointHost()}
	for _, n := range s.inv.ControlPlanes() {
		if !s.off[n.Name] && n.Address != out[0] {
			out = append(out, n.Address)
		}
	}
	return out
}

const probeConfigMap = "homelab-drill"

func (s *sampler) sampleWrite(ctx context.Context) {
	ok := false
	for _, h := range s.servers() {
		cs, err := s.clientFor(h)
		if err != nil {
			continue
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: probeConfigMap, Namespace: "default"}, Data: map[string]string{"at": time.Now().Format(time.RFC3339Nano)}}
		if _, err = cs.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
		}
		if err == nil {
			ok = true
			break
		}
	}
	s.mu.Lock()
	prev := s.writable
	first := s.lastWrite.Sub(s.start) < time.Second
	s.writable = ok
	s.mu.Unlock()
	if prev != ok || (first && !ok) {
		s.event(fmt.Sprintf("writes: %v", map[bool]string{true: "succeed", false: "FAIL"}[ok]))
	}
}

func (s *sampler) sampleNodes(ctx context.Context) {
	for _, h := range s.servers() {
		cs, err := s.clientFor(h)
		if err != nil {
			continue
		}
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, n := range nodes.Items {
			ready := false
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready = true
				}
			}
			s.mu.Lock()
			_, seen := s.res.NotReady[n.Name]
			if !ready && !seen {
				s.res.NotReady[n.Name] = time.Since(s.start)
			}
			s.mu.Unlock()
			if !ready && !seen {
				s.event("Node " + n.Name + " NotReady")
			}
		}
		return
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
	cfg.Dial = nsDial(lab.GatewayNetns)
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

	const script = `for f in kubelet controller-manager scheduler; do printf '%s ' $f; sed -n 's|^ *server: https://||p' /etc/kubernetes/$f.conf 2>/dev/null | head -1; echo; done; printf 'etcd '; sed -n 's|.*--etcd-servers=https://||p' /etc/kubernetes/manifests/kube-apiserver.yaml 2>/dev/null | head -1; echo`
	var etcd []Consumer
	var cms, scheds []Consumer
	for _, n := range inv.Nodes {
		txt, err := l.Run(ctx, n.Name, script)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", n.Name, err)
		}
		for _, line := range strings.Split(txt, "\n") {
			f := strings.Fields(line)
			if len(f) != 2 {
				continue
			}
			addr := strings.Split(f[1], ",")[0]
			switch f[0] {
			case "kubelet":
				out = append(out, Consumer{ID: "kubelet/" + n.Name, Kind: impact.KindKubelet, Node: n.Name, Address: addr})
			case "controller-manager":
				cms = append(cms, Consumer{ID: "controller-manager/" + n.Name, Kind: impact.KindControllerManager, Node: n.Name, Address: addr})
			case "scheduler":
				scheds = append(scheds, Consumer{ID: "scheduler/" + n.Name, Kind: impact.KindScheduler, Node: n.Name, Address: addr})
			case "etcd":
				etcd = append(etcd, Consumer{ID: "apiserver-etcd/" + n.Name, Kind: impact.KindEtcd, Node: n.Name, Address: addr})
			}
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
