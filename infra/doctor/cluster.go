package doctor

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/homelab-dev/homelab/infra/apiprobe"
	"github.com/homelab-dev/homelab/infra/etcdclient"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/nodefacts"
	"github.com/homelab-dev/homelab/roles/pki"
)

// apiHost is one name the API should answer at, and the address dialled.
type apiHost struct{ name, addr string }

func (d *doctor) apiHosts() []apiHost {
	inv := d.t.Inventory
	var hosts []apiHost
	if inv.Cluster.Endpoint.Layout != inventory.LayoutSingleIP {
		ep := inv.EndpointHost()
		hosts = append(hosts, apiHost{ep, ep})
	}
	for _, n := range inv.ControlPlanes() {
		live := d.liveAddress(n)
		hosts = append(hosts, apiHost{n.Address, n.Address}, apiHost{n.Name, live})
		if live != n.Address {
			hosts = append(hosts, apiHost{live, live})
		}
	}
	return hosts
}

// checkAPITLS makes a TLS handshake with every address and name the API
// should answer at, and checks the served certificate for that very name
// and against the required SAN set.
func (d *doctor) checkAPITLS(ctx context.Context) {
	inv := d.t.Inventory
	port := strconv.Itoa(inv.Cluster.Endpoint.Port)
	ca := x509.NewCertPool()
	ca.AppendCertsFromPEM(d.t.Bundle.Talos.Certs.K8s.Crt)
	api, _ := nodefacts.ServingCertOf(nodefacts.APIServerCert)
	want := api.Required(inv)
	seen := map[string]bool{}
	for _, h := range d.apiHosts() {
		where := h.name
		if h.addr != h.name {
			where += " (" + h.addr + ")"
		}
		leaf, err := apiprobe.ServedCertificate(ctx, d.t.Dial, net.JoinHostPort(h.addr, port))
		if err != nil {
			d.r.add("api tls", where, Fail, "no TLS handshake: %v", err)
			continue
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca, DNSName: h.name}); err != nil {
			d.r.add("api tls", where, Fail, "served certificate does not verify for %s: %v", h.name, err)
			d.r.cause("the API certificate served at %s lacks %s: clients reaching the API by %s fail TLS; `homelab up` regenerates it with the required SANs", h.addr, h.name, h.name)
			continue
		}
		d.r.add("api tls", where, OK, "verified for %s", h.name)
		if seen[h.addr] {
			continue
		}
		seen[h.addr] = true
		missing, extra := nodefacts.CompareSANs(nodefacts.SANs(leaf), want, nil)
		if len(missing) == 0 && len(extra) == 0 {
			d.r.add("api sans", h.addr, OK, "served certificate has exactly the required %d SANs", len(want))
		} else {
			d.r.add("api sans", h.addr, Fail, "served certificate lacks [%s], has extra [%s]", strings.Join(missing, " "), strings.Join(extra, " "))
		}
	}
}

func (d *doctor) checkEtcd(ctx context.Context) {
	inv := d.t.Inventory
	pair, err := d.t.Bundle.EtcdClient("homelab-doctor", time.Hour)
	if err != nil {
		d.r.add("etcd", "client", Fail, "minting a client certificate: %v", err)
		return
	}
	var eps []string
	for _, n := range inv.ControlPlanes() {
		eps = append(eps, "https://"+net.JoinHostPort(d.liveAddress(n), strconv.Itoa(nodefacts.EtcdClientPort)))
	}
	cli, err := etcdclient.New(ctx, eps, d.t.Bundle.Talos.Certs.Etcd.Crt, pair, etcdclient.DialFunc(d.t.Dial))
	if err != nil {
		d.r.add("etcd", "cluster", Fail, "%v", err)
		return
	}
	defer cli.Close()
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cli.MemberList(lctx)
	if err != nil {
		d.r.add("etcd", "cluster", Fail, "no member answered (%s): %v", strings.Join(eps, " "), err)
		d.r.cause("etcd answers on no control-plane node: the cluster has lost quorum or every member is down")
		return
	}
	healthy := 0
	var names []string
	for _, m := range resp.Members {
		names = append(names, m.Name)
		n, declared := inv.Node(m.Name)
		peer := ""
		if len(m.PeerURLs) > 0 {
			peer = m.PeerURLs[0]
		}
		if !declared || !n.IsControlPlane() {
			d.r.add("etcd member", m.Name, Fail, "member %x (%s) is not a control-plane node of the inventory", m.ID, peer)
			d.r.cause("etcd has a member %s that the inventory does not declare (a removed or rebuilt node's stale member, kubeadm #2095): `homelab up` removes it", m.Name)
			continue
		}
		live := d.liveAddress(n)
		wantPeer := "https://" + net.JoinHostPort(live, strconv.Itoa(nodefacts.EtcdPeerPort))
		if u, err := url.Parse(peer); err != nil || u.Hostname() != live {
			d.r.add("etcd member", m.Name, Fail, "peer URL %s is stale: the node is at %s", peer, live)
			d.r.cause("etcd member %s's peer URL %s is stale (the node is at %s): its peers cannot reach it, so it cannot rejoin; `homelab up` updates it to %s before restarting that member", m.Name, peer, live, wantPeer)
		} else if live != n.Address {
			d.r.add("etcd member", m.Name, Warn, "peer URL %s is live, but the inventory declares %s", peer, n.Address)
		} else {
			d.r.add("etcd member", m.Name, OK, "peer URL %s", peer)
		}
		sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := cli.Status(sctx, "https://"+net.JoinHostPort(live, strconv.Itoa(nodefacts.EtcdClientPort)))
		scancel()
		if err != nil {
			d.r.add("etcd member", m.Name, Fail, "unhealthy at %s: %v", live, err)
		} else {
			healthy++
			d.r.add("etcd member", m.Name, OK, "healthy at %s", live)
		}
	}
	for _, n := range inv.ControlPlanes() {
		if !slices.Contains(names, n.Name) {
			d.r.add("etcd member", n.Name, Fail, "no etcd member for this control-plane node")
		}
	}
	quorum := len(resp.Members)/2 + 1
	st := OK
	if healthy < quorum {
		st = Fail
	} else if healthy < len(resp.Members) {
		st = Warn
	}
	d.r.add("etcd", "quorum", st, "%d of %d members healthy (quorum %d)", healthy, len(resp.Members), quorum)
}

// apiClient reaches the API at the endpoint, else at any control-plane
// node, as a minted cluster-admin.
func (d *doctor) apiClient(ctx context.Context) (*kubernetes.Clientset, string, error) {
	inv := d.t.Inventory
	certs := d.t.Bundle.Talos.Certs
	crt, key, err := pki.ClientCert(certs.K8s.Crt, certs.K8s.Key, "homelab-doctor", "system:masters", time.Hour)
	if err != nil {
		return nil, "", err
	}
	port := strconv.Itoa(inv.Cluster.Endpoint.Port)
	var errs []string
	for _, h := range d.apiHosts() {
		cfg := &rest.Config{
			Host:            "https://" + net.JoinHostPort(h.addr, port),
			TLSClientConfig: rest.TLSClientConfig{CAData: certs.K8s.Crt, CertData: crt, KeyData: key, ServerName: h.name},
			Dial:            d.t.Dial,
			Timeout:         10 * time.Second,
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, "", err
		}
		if _, err := cs.Discovery().ServerVersion(); err != nil {
			errs = append(errs, h.name+": "+err.Error())
			continue
		}
		return cs, h.name, nil
	}
	return nil, "", fmt.Errorf("the API answers nowhere: %s", strings.Join(errs, "; "))
}

// checkAPI examines what the API holds: the cluster objects' addresses
// and the selectors.
func (d *doctor) checkAPI(ctx context.Context) {
	cs, _, err := d.apiClient(ctx)
	if err != nil {
		d.r.add("cluster object", "api", Fail, "%v", err)
		return
	}
	d.checkClusterObjects(ctx, cs)
	d.checkSelectors(ctx, cs)
}

// checkClusterObjects audits the addresses the cluster hands to clients
// and nodes: cluster-info (joins), kube-proxy's kubeconfig, Cilium's
// k8sServiceHost.
func (d *doctor) checkClusterObjects(ctx context.Context, cs kubernetes.Interface) {
	owner := inventory.Node{}
	objs := []struct{ ns, name, key string }{
		{"kube-public", "cluster-info", "kubeconfig"},
		{"kube-system", "kube-proxy", "kubeconfig.conf"},
	}
	for _, o := range objs {
		cm, err := cs.CoreV1().ConfigMaps(o.ns).Get(ctx, o.name, metav1.GetOptions{})
		where := "configmap " + o.ns + "/" + o.name
		if apierrors.IsNotFound(err) {
			if o.name == "kube-proxy" && d.t.Inventory.Cluster.KubeProxy.Replacement == inventory.ReplacementCilium {
				continue
			}
			d.r.add("cluster object", where, Warn, "absent")
			continue
		}
		if err != nil {
			d.r.add("cluster object", where, Fail, "%v", err)
			continue
		}
		kc, err := clientcmd.Load([]byte(cm.Data[o.key]))
		if err != nil {
			d.r.add("cluster object", where, Fail, "%s is not a kubeconfig: %v", o.key, err)
			continue
		}
		for _, c := range kc.Clusters {
			d.audit("cluster object", where, owner, c.Server)
		}
	}
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "cilium-config", metav1.GetOptions{})
	if err == nil {
		if h := cm.Data["k8s-service-host"]; h != "" {
			d.audit("cluster object", "configmap kube-system/cilium-config k8s-service-host", owner, "https://"+net.JoinHostPort(h, cm.Data["k8s-service-port"]))
		}
	}
}
