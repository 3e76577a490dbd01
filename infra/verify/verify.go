// Package verify proves a built cluster works the way the inventory says,
// from the outside, with client-go and the etcd client: every node Ready on
// its own address, etcd's members the control-plane nodes and healthy, the
// API answering at the endpoint and at every control-plane address with TLS
// verified for that address, a write through the endpoint visible in etcd;
// then the seed's hands-on lab asked of the cluster itself (Practice).
package verify

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"
	clientv3 "go.etcd.io/etcd/client/v3"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/homelab-dev/homelab/infra/apiprobe"
	"github.com/homelab-dev/homelab/infra/etcdclient"
	"github.com/homelab-dev/homelab/infra/readiness"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/kubeadm"
	"github.com/homelab-dev/homelab/roles/pki"
)

// DialFunc opens connections (the emulated homelab's come from its gateway
// namespace).
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Target is the cluster to verify.
type Target struct {
	Inventory  *inventory.Inventory
	Bundle     *pki.Bundle
	Kubeconfig []byte
	Dial       DialFunc
}

// Check is one verified property.
type Check struct {
	Name   string
	OK     bool
	Detail string
}

// Report lists every check, and what was found.
type Report struct {
	Checks      []Check
	EtcdMembers []string
	Nodes       []string
}

func (r *Report) add(name string, err error, detail string) error {
	c := Check{Name: name, OK: err == nil, Detail: detail}
	if err != nil {
		c.Detail = err.Error()
	}
	r.Checks = append(r.Checks, c)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// Namespace the seed's practice writes through the endpoint and reads back
// straight from etcd.
const Namespace = "kcna-arch"

// Run verifies everything and returns an error listing every failed check.
func Run(ctx context.Context, t Target) (*Report, error) {
	if t.Dial == nil {
		t.Dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	}
	rep := &Report{}
	var errs *multierror.Error
	cs, err := clientset(t)
	if err != nil {
		return nil, err
	}
	inv := t.Inventory

	ca := x509.NewCertPool()
	ca.AppendCertsFromPEM(t.Bundle.Talos.Certs.K8s.Crt)
	hosts := []string{inv.EndpointHost()}
	for _, n := range inv.ControlPlanes() {
		if !slices.Contains(hosts, n.Address) {
			hosts = append(hosts, n.Address)
		}
		hosts = append(hosts, n.Name)
	}
	for _, h := range hosts {
		errs = multierror.Append(errs, rep.add("API answers /readyz at "+h+" (TLS verified for that name)", readyz(ctx, t, ca, h), ""))
	}

	nodes, err := checkNodes(ctx, cs, inv)
	rep.Nodes = nodes
	errs = multierror.Append(errs, rep.add("every node registered and Ready on its own address", err, strings.Join(nodes, ", ")))

	errs = multierror.Append(errs, rep.add("the API server reaches every kubelet, its serving certificate verified with the cluster CA", checkKubelets(ctx, cs, inv), ""))

	members, err := checkEtcd(ctx, t)
	rep.EtcdMembers = members
	errs = multierror.Append(errs, rep.add("etcd members are the control-plane nodes, all healthy", err, strings.Join(members, ", ")))

	errs = multierror.Append(errs, rep.add("namespace "+Namespace+" written through the endpoint is in etcd", writeAndReadBack(ctx, cs, t), "/registry/namespaces/"+Namespace))

	res, err := cs.Discovery().ServerPreferredResources()
	count := 0
	for _, l := range res {
		count += len(l.APIResources)
	}
	if err == nil && count == 0 {
		err = fmt.Errorf("discovery listed no API resources")
	}
	errs = multierror.Append(errs, rep.add("discovery lists the API resources", err, strconv.Itoa(count)+" resources"))

	errs = multierror.Append(errs, rep.add("label selector "+kubeadm.GPUPresentLabel+"=true finds the GPU nodes", checkSelector(ctx, cs, inv), ""))
	errs = multierror.Append(errs, runPractice(ctx, cs, rep, DefaultPractice()))
	return rep, errs.ErrorOrNil()
}

// clientset reaches the API through the kubeconfig's server (the
// endpoint), dialled with t.Dial.
func clientset(t Target) (*kubernetes.Clientset, error) {
	if t.Dial == nil {
		t.Dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(t.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.Dial = t.Dial
	cfg.Timeout = 15 * time.Second
	return kubernetes.NewForConfig(cfg)
}

// readyz asks one address with TLS verified for that very name: a SAN
// missing from the certificate fails here, not when a node dies.
func readyz(ctx context.Context, t Target, ca *x509.CertPool, host string) error {
	addr := host
	if n, ok := t.Inventory.Node(host); ok {
		addr = n.Address // the name is checked as a SAN, dialled by address
	}
	probe := apiprobe.Readyz{CA: ca, ServerName: host, Dial: t.Dial, Timeout: 10 * time.Second}
	return probe.Check(ctx, net.JoinHostPort(addr, strconv.Itoa(t.Inventory.Cluster.Endpoint.Port)))
}

func checkNodes(ctx context.Context, cs kubernetes.Interface, inv *inventory.Inventory) ([]string, error) {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	byName := map[string]corev1.Node{}
	var names []string
	for _, n := range list.Items {
		byName[n.Name] = n
		names = append(names, n.Name)
	}
	sort.Strings(names)
	var problems []string
	for _, want := range inv.Nodes {
		n, ok := byName[want.Name]
		if !ok {
			problems = append(problems, want.Name+" is not registered")
			continue
		}
		if why := readiness.Of(&n); why != "" {
			p := want.Name + " is not " + why
			if readiness.NoNetwork(why) && inv.Cluster.CNI == inventory.CNINone {
				p += " (cluster.cni is none: homelab installs no pod network; install yours)"
			}
			problems = append(problems, p)
		}
		var internal []string
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				internal = append(internal, a.Address)
			}
		}
		if !slices.Equal(internal, []string{want.Address}) {
			problems = append(problems, fmt.Sprintf("%s's InternalIP is %v, want %s", want.Name, internal, want.Address))
		}
	}
	if len(problems) > 0 {
		return names, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return names, nil
}

// checkKubelets asks each node's kubelet for /healthz through the API
// server's node proxy: the API server dials the kubelet's port and, with
// --kubelet-certificate-authority, verifies its serving certificate
// against the cluster CA, as it does for logs and exec. A kubelet serving
// a self-signed certificate, or none yet (its CSR not approved), fails
// here.
func checkKubelets(ctx context.Context, cs kubernetes.Interface, inv *inventory.Inventory) error {
	var problems []string
	for _, n := range inv.Nodes {
		body, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", n.Name, "proxy", "healthz").DoRaw(ctx)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", n.Name, err))
			continue
		}
		if strings.TrimSpace(string(body)) != "ok" {
			problems = append(problems, fmt.Sprintf("%s: /healthz answered %q", n.Name, body))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

func checkSelector(ctx context.Context, cs kubernetes.Interface, inv *inventory.Inventory) error {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kubeadm.GPUPresentLabel + "=true"})
	if err != nil {
		return err
	}
	var got, want []string
	for _, n := range list.Items {
		got = append(got, n.Name)
	}
	for _, n := range inv.Nodes {
		if kubeadm.Labels(n)[kubeadm.GPUPresentLabel] == "true" {
			want = append(want, n.Name)
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		return fmt.Errorf("found %v, want %v", got, want)
	}
	return nil
}

func etcdClient(ctx context.Context, t Target) (*clientv3.Client, error) {
	cert, err := t.Bundle.EtcdClient("homelab-verify", time.Hour)
	if err != nil {
		return nil, err
	}
	var eps []string
	for _, n := range t.Inventory.ControlPlanes() {
		eps = append(eps, "https://"+net.JoinHostPort(n.Address, "2379"))
	}
	return etcdclient.New(ctx, eps, t.Bundle.Talos.Certs.Etcd.Crt, cert, etcdclient.DialFunc(t.Dial))
}

func checkEtcd(ctx context.Context, t Target) ([]string, error) {
	cli, err := etcdClient(ctx, t)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	var names, problems []string
	for _, m := range resp.Members {
		names = append(names, m.Name)
		if len(m.ClientURLs) == 0 {
			problems = append(problems, m.Name+" has not started")
			continue
		}
		if _, err := cli.Status(ctx, m.ClientURLs[0]); err != nil {
			problems = append(problems, fmt.Sprintf("%s unhealthy: %v", m.Name, err))
		}
	}
	sort.Strings(names)
	var want []string
	for _, n := range t.Inventory.ControlPlanes() {
		want = append(want, n.Name)
	}
	sort.Strings(want)
	if !slices.Equal(names, want) {
		problems = append(problems, fmt.Sprintf("members %v, want %v", names, want))
	}
	if len(problems) > 0 {
		return names, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return names, nil
}

// writeAndReadBack is the seed's practice: data written through the
// endpoint must be in etcd, read from a member directly.
func writeAndReadBack(ctx context.Context, cs kubernetes.Interface, t Target) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	cli, err := etcdClient(ctx, t)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/registry/namespaces/"+Namespace)
	if err != nil {
		return err
	}
	if len(resp.Kvs) != 1 {
		return fmt.Errorf("not found in etcd")
	}
	return nil
}
