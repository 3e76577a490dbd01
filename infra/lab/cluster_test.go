package lab

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"path"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	scp "github.com/bramvdbogaerde/go-scp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/crypto/ssh"
	"google.golang.org/grpc"
	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/homelab-dev/homelab/infra/helmrelease"
	"github.com/homelab-dev/homelab/infra/readiness"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles"
	"github.com/homelab-dev/homelab/roles/cilium"
	"github.com/homelab-dev/homelab/roles/kubeadm"
	"github.com/homelab-dev/homelab/roles/pki"
)

// cluster is an HA cluster built on a lab the way the provisioner will:
// rendered files over SSH, then the same commands an operator would type.
type cluster struct {
	l      *Lab
	inv    *inventory.Inventory
	dialer *Dialer
	ssh    map[string]*ssh.Client
	ca     *x509.CertPool
	kube   *kubernetes.Clientset
	first  string
	// etcdTLS is read from the first node once: it may be powered off later.
	etcdTLS *tls.Config
}

// figures are what the benchmark and the e2e test report.
type figures struct {
	up, init, toReady time.Duration
	joins             map[string]time.Duration
	memKiB            map[string]uint64
}

func (f figures) totalMiB() float64 {
	var sum uint64
	for _, v := range f.memKiB {
		sum += v
	}
	return float64(sum) / 1024
}

func (f figures) log(tb testing.TB) {
	tb.Logf("figures: lab up %s; kubeadm init %s; init start to 7 Ready %s; lab memory %.0f MiB PSS",
		f.up.Round(time.Millisecond), f.init.Round(time.Millisecond), f.toReady.Round(time.Second), f.totalMiB())
	var names []string
	for n := range f.memKiB {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		tb.Logf("  %s: %.0f MiB PSS, join %s", n, float64(f.memKiB[n])/1024, f.joins[n].Round(time.Millisecond))
	}
}

// bringUpCluster boots the lab, lays roles.Render's files on every node over
// SSH, starts keepalived on the control plane, runs kubeadm init and the
// joins, installs the pod network (the lab's Cilium chart, with Helm) once
// every Node is NotReady for want of one, and waits for every Node to be
// Ready.
func bringUpCluster(tb testing.TB, l *Lab) (*cluster, figures) {
	tb.Helper()
	var fig figures
	start := time.Now()
	up(tb, l)
	fig.up = time.Since(start)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	inv, _, err := inventory.Load(labInventory)
	if err != nil {
		tb.Fatal(err)
	}
	bundle, err := pki.New()
	if err != nil {
		tb.Fatal(err)
	}
	rendered, err := roles.Render(inv, bundle)
	if err != nil {
		tb.Fatal(err)
	}
	c := &cluster{l: l, inv: inv, ssh: map[string]*ssh.Client{}, first: inv.ControlPlanes()[0].Name}
	if c.dialer, err = l.Dialer(); err != nil {
		tb.Fatal(err)
	}
	for _, n := range inv.Nodes {
		cl, err := l.SSH(ctx, n.Name)
		if err != nil {
			tb.Fatal(err)
		}
		c.ssh[n.Name] = cl
	}
	tb.Cleanup(func() {
		for _, cl := range c.ssh {
			cl.Close()
		}
	})

	parallel(tb, rendered.Nodes, func(nf roles.NodeFiles) error {
		return upload(ctx, c.ssh[nf.Node.Name], nf)
	})
	for _, nf := range rendered.Nodes {
		for _, f := range nf.Files {
			if f.Path == "/etc/kubernetes/pki/ca.crt" && c.ca == nil {
				c.ca = x509.NewCertPool()
				if !c.ca.AppendCertsFromPEM(f.Content) {
					tb.Fatal("rendered ca.crt holds no certificate")
				}
			}
		}
	}
	if c.ca == nil {
		tb.Fatal("roles.Render gave no /etc/kubernetes/pki/ca.crt")
	}

	for _, n := range inv.ControlPlanes() {
		c.run(tb, ctx, n.Name, "systemctl enable --now keepalived")
	}

	fig.joins = map[string]time.Duration{}
	t0 := time.Now()
	c.run(tb, ctx, c.first, "kubeadm init --config "+kubeadm.InitConfigPath)
	fig.init = time.Since(t0)
	fig.joins[c.first] = fig.init
	// Each node joins with its own token, which the provisioner makes
	// just before; here, as kubeadm's docs do it by hand.
	for _, n := range inv.Nodes {
		if n.Name != c.first {
			c.run(tb, ctx, c.first, "kubeadm token create "+bundle.JoinToken(n.Name)+" --ttl 1h")
		}
	}
	for _, n := range inv.ControlPlanes()[1:] {
		// One control-plane join at a time: each grows etcd by a member,
		// and a second join before the first member is started loses quorum.
		t := time.Now()
		c.run(tb, ctx, n.Name, "kubeadm join --config "+kubeadm.JoinConfigPath)
		fig.joins[n.Name] = time.Since(t)
	}
	var mu sync.Mutex
	parallel(tb, inv.Workers(), func(n inventory.Node) error {
		t := time.Now()
		_, err := RunOn(ctx, c.ssh[n.Name], "kubeadm join --config "+kubeadm.JoinConfigPath)
		mu.Lock()
		fig.joins[n.Name] = time.Since(t)
		mu.Unlock()
		return err
	})

	c.kube = c.clientset(tb, ctx)
	c.waitNoNetwork(tb, ctx, len(inv.Nodes), time.Minute)
	c.installPodNetwork(tb, ctx)
	c.waitReady(tb, ctx, len(inv.Nodes), 5*time.Minute)
	fig.toReady = time.Since(t0)
	return c, fig
}

func (c *cluster) run(tb testing.TB, ctx context.Context, node, cmd string) string {
	tb.Helper()
	out, err := RunOn(ctx, c.ssh[node], cmd)
	if err != nil {
		tb.Fatalf("%s: %v\n%s", node, err, out)
	}
	return out
}

// upload copies a node's rendered files with scp, as the provisioner will.
func upload(ctx context.Context, cl *ssh.Client, nf roles.NodeFiles) error {
	dirs := map[string]bool{}
	for _, f := range nf.Files {
		dirs[path.Dir(f.Path)] = true
	}
	var list []string
	for d := range dirs {
		list = append(list, d)
	}
	sort.Strings(list)
	if _, err := RunOn(ctx, cl, "mkdir -p "+strings.Join(list, " ")); err != nil {
		return err
	}
	sc, err := scp.NewClientBySSH(cl)
	if err != nil {
		return err
	}
	for _, f := range nf.Files {
		if err := sc.CopyFile(ctx, bytes.NewReader(f.Content), f.Path, fmt.Sprintf("%04o", f.Mode.Perm())); err != nil {
			return fmt.Errorf("%s: scp %s: %w", nf.Node.Name, f.Path, err)
		}
	}
	return nil
}

func parallel[T any](tb testing.TB, items []T, fn func(T) error) {
	tb.Helper()
	errs := make([]error, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(it)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// clientset reads admin.conf from the first control-plane node and dials
// the API (the VIP) through the lab.
func (c *cluster) clientset(tb testing.TB, ctx context.Context) *kubernetes.Clientset {
	tb.Helper()
	conf := c.run(tb, ctx, c.first, "cat /etc/kubernetes/admin.conf")
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(conf))
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Dial = c.dialer.DialContext
	cfg.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		tb.Fatal(err)
	}
	return cs
}

// waitNoNetwork waits for want Nodes NotReady with the kubelet's words for
// a runtime without a pod network: a kubelet is not Ready before a CNI.
func (c *cluster) waitNoNetwork(tb testing.TB, ctx context.Context, want int, timeout time.Duration) {
	tb.Helper()
	var last []string
	err := eventually(timeout, func() error {
		nodes, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		last = nil
		n := 0
		for i := range nodes.Items {
			why := readiness.Of(&nodes.Items[i])
			if readiness.NoNetwork(why) {
				n++
			}
			last = append(last, nodes.Items[i].Name+": "+why)
		}
		if n != want {
			return fmt.Errorf("%d of %d Nodes NotReady for want of a network", n, want)
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("before the CNI: %v:\n  %s", err, strings.Join(last, "\n  "))
	}
}

// installPodNetwork installs the lab's Cilium chart with the values the
// inventory renders.
func (c *cluster) installPodNetwork(tb testing.TB, ctx context.Context) {
	tb.Helper()
	ch, err := loader.Load(c.l.ChartPath())
	if err != nil {
		tb.Fatal(err)
	}
	data, err := cilium.Render(c.inv)
	if err != nil {
		tb.Fatal(err)
	}
	values, err := helmrelease.ParseValues(data)
	if err != nil {
		tb.Fatal(err)
	}
	conf := c.run(tb, ctx, c.first, "cat /etc/kubernetes/admin.conf")
	t := helmrelease.Target{Kubeconfig: []byte(conf), Dial: c.dialer.DialContext, Namespace: cilium.Namespace, Release: cilium.Release}
	if _, err := helmrelease.Apply(ctx, t, ch, values, 5*time.Minute, nil); err != nil {
		tb.Fatalf("installing the pod network: %v", err)
	}
}

func (c *cluster) waitReady(tb testing.TB, ctx context.Context, want int, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		nodes, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			ready := 0
			var states []string
			for _, n := range nodes.Items {
				ok := false
				for _, cond := range n.Status.Conditions {
					if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
						ok = true
					}
				}
				if ok {
					ready++
				}
				states = append(states, fmt.Sprintf("%s=%v", n.Name, ok))
			}
			last = strings.Join(states, " ")
			if ready == want {
				return
			}
		} else {
			last = err.Error()
		}
		time.Sleep(time.Second)
	}
	tb.Fatalf("not %d Ready Nodes after %s: %s", want, timeout, last)
}

// etcd connects to the given control-plane nodes' etcd with the
// apiserver's etcd client certificate.
func (c *cluster) etcd(tb testing.TB, ctx context.Context, nodes ...string) *clientv3.Client {
	tb.Helper()
	if c.etcdTLS == nil {
		crt := c.run(tb, ctx, c.first, "cat /etc/kubernetes/pki/apiserver-etcd-client.crt")
		key := c.run(tb, ctx, c.first, "cat /etc/kubernetes/pki/apiserver-etcd-client.key")
		ca := c.run(tb, ctx, c.first, "cat /etc/kubernetes/pki/etcd/ca.crt")
		pair, err := tls.X509KeyPair([]byte(crt), []byte(key))
		if err != nil {
			tb.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM([]byte(ca))
		c.etcdTLS = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}
	}
	var eps []string
	for _, n := range nodes {
		nd, _ := c.inv.Node(n)
		eps = append(eps, "https://"+net.JoinHostPort(nd.Address, "2379"))
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   eps,
		DialTimeout: 5 * time.Second,
		TLS:         c.etcdTLS.Clone(),
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return c.dialer.DialContext(ctx, "tcp", addr)
		})},
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cli.Close() })
	return cli
}

// healthyMembers counts endpoints that answer Status and serve a
// linearizable read, which needs a quorum.
func healthyMembers(ctx context.Context, cli *clientv3.Client) (int, []string) {
	ok := 0
	var problems []string
	for _, ep := range cli.Endpoints() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := cli.Status(sctx, ep)
		cancel()
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", ep, err))
			continue
		}
		if len(st.Errors) > 0 || st.Leader == 0 {
			problems = append(problems, fmt.Sprintf("%s: errors %v leader %x", ep, st.Errors, st.Leader))
			continue
		}
		ok++
	}
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cli.Get(gctx, "health"); err != nil {
		problems = append(problems, "linearizable read: "+err.Error())
		return 0, problems
	}
	return ok, problems
}

// readyz GETs /readyz at an address with TLS verified against the cluster
// CA for exactly that address.
func (c *cluster) readyz(ctx context.Context, addr string) error {
	tr := &http.Transport{
		DialContext:     c.dialer.DialContext,
		TLSClientConfig: &tls.Config{RootCAs: c.ca, ServerName: addr},
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	resp, err := hc.Get("https://" + net.JoinHostPort(addr, "6443") + "/readyz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz at %s: %s: %s", addr, resp.Status, body)
	}
	return nil
}

// vipHolders lists the control-plane nodes whose interface has the VIP.
func (c *cluster) vipHolders() []string {
	var out []string
	for _, n := range c.inv.ControlPlanes() {
		if ns := c.l.Names().Node(n.Name); netnsExists(ns) && hasAddress(ns, c.inv.Cluster.Endpoint.VIP) {
			out = append(out, n.Name)
		}
	}
	return out
}

func eventually(timeout time.Duration, fn func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(250 * time.Millisecond)
	}
}
