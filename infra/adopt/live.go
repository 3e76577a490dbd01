package adopt

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/homelab-dev/homelab/infra/apiprobe"
	"github.com/homelab-dev/homelab/infra/cniconf"
	"github.com/homelab-dev/homelab/infra/etcdclient"
	"github.com/homelab-dev/homelab/infra/scripts/nodeprobes"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/keepalived"
	"github.com/homelab-dev/homelab/roles/nodefacts"
	"github.com/homelab-dev/homelab/roles/pki"
)

// probeScript is read-only: it lists which of the files adopt decides by
// exist, and kubeadm's leftovers (nodefacts.Leftovers).
var probeScript = nodeprobes.Presence(nodefacts.Files(nodefacts.KubeletConf, nodefacts.AdminConf,
	nodefacts.Manifest(nodefacts.KubeAPIServer), nodefacts.Manifest(nodefacts.Etcd),
	nodefacts.InitMarker, nodefacts.JoinMarker, nodefacts.CAKey, keepalived.ConfigPath)...)

// NodeFacts is what one node holds.
type NodeFacts struct {
	Name string
	// Files lists which probed files exist (nodefacts.AnyManifest for
	// any manifest).
	Files map[string]bool
	// CACert and EtcdCACert are the node's /etc/kubernetes/pki/ca.crt and
	// etcd/ca.crt (nil when absent).
	CACert, EtcdCACert []byte
	// APIServerCert is a control-plane node's apiserver.crt.
	APIServerCert *x509.Certificate
	// Keepalived is a control-plane node's keepalived.conf.
	Keepalived []byte
	// CNI is the network its runtime loads from /etc/cni/net.d (when
	// CNIRead; CNIErr says why there is none).
	CNI     cniconf.Network
	CNIErr  error
	CNIRead bool
}

// HasKubeadmFiles reports whether kubeadm left anything on the node (the
// provider then counts it as an interrupted run unless it is marked): the
// provider's own test, from the same list.
func (f *NodeFacts) HasKubeadmFiles() bool { return nodefacts.HasLeftovers(f.Files) }

// APINode is a Node object.
type APINode struct {
	Name, InternalIP string
	ControlPlane     bool
}

// Member is an etcd member.
type Member struct {
	ID            uint64
	Name, PeerURL string
}

// Live is the cluster as adopt found it.
type Live struct {
	// Source is the control-plane node the PKI, admin.conf and etcd were
	// read through.
	Source string
	Nodes  map[string]*NodeFacts
	// APINodes are the Node objects, by name.
	APINodes []APINode
	// Members are etcd's members; EtcdClusterID its cluster ID.
	Members       []Member
	EtcdClusterID uint64
	// ControlPlaneEndpoint is kubeadm-config's ClusterConfiguration's.
	ControlPlaneEndpoint string
	// Served are the SANs of the certificate served at the inventory's
	// endpoint (nil, with ServedErr, when no handshake succeeded).
	Served    []string
	ServedErr error
	// Encryption is what the source's kube-apiserver does for Secrets.
	Encryption Encryption
}

// APINode returns the Node object of that name.
func (l *Live) APINode(name string) (APINode, bool) {
	for _, n := range l.APINodes {
		if n.Name == name {
			return n, true
		}
	}
	return APINode{}, false
}

// Member returns the etcd member of that name.
func (l *Live) Member(name string) (Member, bool) {
	for _, m := range l.Members {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

// dialAll connects to every declared node, host keys verified. Any node
// it cannot reach is an error naming it: adopt decides nothing on a
// partial view.
func dialAll(ctx context.Context, t Target) (map[string]*ssh.Client, error) {
	inv := t.Inventory
	port := inv.SSH.Port
	if port == 0 {
		port = 22
	}
	user := inv.SSH.User
	if user == "" {
		user = "root"
	}
	opts := []ssh.Option{ssh.WithCommandLog(t.CommandLog), ssh.WithRetry(5 * time.Second), ssh.WithTimeout(10 * time.Second)}
	if t.Dial != nil {
		opts = append(opts, ssh.WithDialer(t.Dial))
	}
	clients := map[string]*ssh.Client{}
	errs := make([]error, len(inv.Nodes))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, n := range inv.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := ssh.Dial(ctx, ssh.Target{Name: n.Name, Address: n.Address, Port: port, User: user, PrivateKey: t.PrivateKey, KnownHosts: t.KnownHosts}, opts...)
			if err != nil {
				errs[i] = fmt.Errorf("cannot reach %s (nodes[%d], %s): %w; power it on and check SSH, or remove it from the inventory if it is gone", n.Name, i, n.Address, err)
				return
			}
			mu.Lock()
			clients[n.Name] = c
			mu.Unlock()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range clients {
			c.Close()
		}
		return nil, err
	}
	return clients, nil
}

func readOptional(ctx context.Context, r Reader, p string) ([]byte, error) {
	data, err := r.Read(ctx, p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

func probeNode(ctx context.Context, c *ssh.Client, n inventory.Node) (*NodeFacts, error) {
	res, err := c.Query(ctx, probeScript.String())
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("%s: reading its state: exit %d: %s", n.Name, res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	f := &NodeFacts{Name: n.Name, Files: nodefacts.ParsePresence(string(res.Stdout))}
	if f.CACert, err = readOptional(ctx, c, nodefacts.CACert); err != nil {
		return nil, err
	}
	f.CNI, f.CNIErr, f.CNIRead = cniconf.ReadNode(ctx, c)
	if !n.IsControlPlane() {
		return f, nil
	}
	if f.EtcdCACert, err = readOptional(ctx, c, nodefacts.EtcdCACert); err != nil {
		return nil, err
	}
	crt, err := readOptional(ctx, c, nodefacts.PKIFile(nodefacts.APIServerCert))
	if err != nil {
		return nil, err
	}
	if crt != nil {
		if f.APIServerCert, err = nodefacts.ParseCertPEM(crt); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", n.Name, nodefacts.PKIFile(nodefacts.APIServerCert), err)
		}
	}
	if f.Keepalived, err = readOptional(ctx, c, keepalived.ConfigPath); err != nil {
		return nil, err
	}
	return f, nil
}

func subject(data []byte) string {
	c, err := nodefacts.ParseCertPEM(data)
	if err != nil {
		return "unreadable"
	}
	return fmt.Sprintf("%q, serial %x", c.Subject.CommonName, c.SerialNumber)
}

// readCluster reads the API (with the source's admin.conf), etcd (with a
// client certificate minted from the bundle's etcd CA) and the
// certificate served at the endpoint, all through the source's SSH
// connection.
func readCluster(ctx context.Context, inv *inventory.Inventory, c *ssh.Client, source inventory.Node, b *pki.Bundle, live *Live) error {
	kc, err := c.Read(ctx, nodefacts.AdminConf)
	if err != nil {
		return fmt.Errorf("%s: reading %s: %w", source.Name, nodefacts.AdminConf, err)
	}
	cs, err := apiClient(ctx, c, kc, source, inv.Cluster.Endpoint.APIPort())
	if err != nil {
		return fmt.Errorf("%s: the API: %w", source.Name, err)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("%s: listing Nodes: %w", source.Name, err)
	}
	for _, n := range nodes.Items {
		an := APINode{Name: n.Name}
		_, an.ControlPlane = n.Labels["node-role.kubernetes.io/control-plane"]
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && an.InternalIP == "" {
				an.InternalIP = a.Address
			}
		}
		live.APINodes = append(live.APINodes, an)
	}
	sort.Slice(live.APINodes, func(i, j int) bool { return live.APINodes[i].Name < live.APINodes[j].Name })
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("%s: reading kube-system/kubeadm-config: %w (was this cluster built by kubeadm?)", source.Name, err)
	}
	var cc struct {
		ControlPlaneEndpoint string `json:"controlPlaneEndpoint"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["ClusterConfiguration"]), &cc); err != nil {
		return fmt.Errorf("kube-system/kubeadm-config: ClusterConfiguration: %w", err)
	}
	live.ControlPlaneEndpoint = cc.ControlPlaneEndpoint

	if err := readEtcd(ctx, c, b, live); err != nil {
		return fmt.Errorf("%s: etcd: %w", source.Name, err)
	}
	if leaf, err := apiprobe.ServedCertificate(ctx, c.DialContext, net.JoinHostPort(inv.EndpointHost(), strconv.Itoa(inv.Cluster.Endpoint.Port))); err != nil {
		live.ServedErr = err
	} else {
		live.Served = nodefacts.SANs(leaf)
	}
	return nil
}

// apiClient reaches the API as admin.conf says (the endpoint), through the
// SSH connection; if the endpoint does not answer from there, at the
// source node's own address.
func apiClient(ctx context.Context, c *ssh.Client, kubeconfig []byte, source inventory.Node, port int) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", nodefacts.AdminConf, err)
	}
	cfg.Dial = c.DialContext
	cfg.Timeout = 15 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	_, first := cs.Discovery().ServerVersion()
	if first == nil {
		return cs, nil
	}
	cfg.Host = "https://" + net.JoinHostPort(source.Address, strconv.Itoa(port))
	if cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		return nil, fmt.Errorf("no answer at admin.conf's server (%v) nor at %s (%v)", first, cfg.Host, err)
	}
	return cs, nil
}

func readEtcd(ctx context.Context, c *ssh.Client, b *pki.Bundle, live *Live) error {
	pair, err := b.EtcdClient("homelab-adopt", time.Hour)
	if err != nil {
		return err
	}
	cli, err := etcdclient.New(ctx, []string{"https://127.0.0.1:2379"}, b.Talos.Certs.Etcd.Crt, pair, c.DialContext)
	if err != nil {
		return err
	}
	defer cli.Close()
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cli.MemberList(lctx)
	if err != nil {
		return err
	}
	live.EtcdClusterID = resp.Header.ClusterId
	for _, m := range resp.Members {
		peer := ""
		if len(m.PeerURLs) > 0 {
			peer = m.PeerURLs[0]
		}
		live.Members = append(live.Members, Member{ID: m.ID, Name: m.Name, PeerURL: peer})
	}
	sort.Slice(live.Members, func(i, j int) bool { return live.Members[i].Name < live.Members[j].Name })
	return nil
}
