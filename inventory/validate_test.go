package inventory

import (
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func baseDoc(t testing.TB) map[string]any {
	t.Helper()
	data, err := os.ReadFile("homelab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// at walks a dotted path ("cluster.endpoint", "nodes.2") to a mapping.
func at(m map[string]any, path string) map[string]any {
	cur := any(m)
	for _, p := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[p]
		case []any:
			i := 0
			for _, ch := range p {
				i = i*10 + int(ch-'0')
			}
			cur = c[i]
		}
	}
	return cur.(map[string]any)
}

func paths(ps []*Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Path)
	}
	sort.Strings(out)
	return out
}

func TestExampleInventoriesAreValid(t *testing.T) {
	for _, f := range []string{"homelab.yaml", "lab.yaml"} {
		inv, warnings, err := Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(warnings) != 0 {
			t.Errorf("%s: unexpected warnings %v", f, warnings)
		}
		if got := len(inv.ControlPlanes()); got != 3 {
			t.Errorf("%s: %d control-plane nodes, want 3", f, got)
		}
		if got := len(inv.Workers()); got != 4 {
			t.Errorf("%s: %d workers, want 4", f, got)
		}
		for _, w := range inv.Workers() {
			if !w.HasGPUs() {
				t.Errorf("%s: %s has no GPU", f, w.Name)
			}
		}
	}
}

func TestBadInventories(t *testing.T) {
	type mutate func(m map[string]any)
	cases := []struct {
		name   string
		raw    string // used instead of the mutated base when set
		mutate mutate
		want   []string
	}{
		{name: "empty file", raw: "", want: []string{"(file)"}},
		{name: "not yaml", raw: "cluster: [", want: []string{"(file)"}},
		{name: "two documents", raw: "nodes: []\n---\nnodes: []\n", want: []string{"(file)"}},
		{name: "unknown top-level field", mutate: func(m map[string]any) { m["node"] = []any{} }, want: []string{"node"}},
		{name: "unknown endpoint field", mutate: func(m map[string]any) { at(m, "cluster.endpoint")["vipp"] = "10.0.0.100" }, want: []string{"cluster.endpoint.vipp"}},
		{name: "unknown node field", mutate: func(m map[string]any) { at(m, "nodes.0")["adress"] = "10.0.0.5" }, want: []string{"nodes[0].adress"}},
		{name: "port not a number", mutate: func(m map[string]any) { at(m, "cluster.endpoint")["port"] = "https" }, want: []string{"cluster.endpoint.port"}},
		{name: "nodes not a list", mutate: func(m map[string]any) { m["nodes"] = "cp-1" }, want: []string{"nodes"}},
		{name: "labels not a mapping", mutate: func(m map[string]any) { at(m, "nodes.3")["labels"] = []any{"a"} }, want: []string{"nodes[3].labels"}},
		{name: "cluster name", mutate: func(m map[string]any) { at(m, "cluster")["name"] = "Home_Lab" }, want: []string{"cluster.name"}},
		{name: "version without v", mutate: func(m map[string]any) { at(m, "cluster")["kubernetesVersion"] = "1.34.4" }, want: []string{"cluster.kubernetesVersion"}},
		{name: "version too old for v1beta4", mutate: func(m map[string]any) { at(m, "cluster")["kubernetesVersion"] = "v1.29.3" }, want: []string{"cluster.kubernetesVersion"}},
		{name: "version too new", mutate: func(m map[string]any) { at(m, "cluster")["kubernetesVersion"] = "v2.0.0" }, want: []string{"cluster.kubernetesVersion"}},
		{name: "version garbage", mutate: func(m map[string]any) { at(m, "cluster")["kubernetesVersion"] = "vlatest" }, want: []string{"cluster.kubernetesVersion"}},
		{name: "snapshot schedule garbage", mutate: func(m map[string]any) {
			at(m, "cluster")["etcd"] = map[string]any{"snapshots": map[string]any{"schedule": "every night", "keep": 3}}
		}, want: []string{"cluster.etcd.snapshots.schedule"}},
		{name: "snapshot schedule too short and keep zero", mutate: func(m map[string]any) {
			at(m, "cluster")["etcd"] = map[string]any{"snapshots": map[string]any{"schedule": "2s", "keep": -1}}
		}, want: []string{"cluster.etcd.snapshots.keep", "cluster.etcd.snapshots.schedule"}},
		{name: "snapshot keep too many", mutate: func(m map[string]any) {
			at(m, "cluster")["etcd"] = map[string]any{"snapshots": map[string]any{"schedule": "daily", "keep": 5000}}
		}, want: []string{"cluster.etcd.snapshots.keep"}},
		{name: "snapshot unknown field", mutate: func(m map[string]any) {
			at(m, "cluster")["etcd"] = map[string]any{"snapshots": map[string]any{"interval": "6h"}}
		}, want: []string{"cluster.etcd.snapshots.interval"}},
		{name: "upgrade batch and drain timeout", mutate: func(m map[string]any) {
			at(m, "cluster")["upgrade"] = map[string]any{"maxUnavailable": -1, "drainTimeout": "soon"}
		}, want: []string{"cluster.upgrade.drainTimeout", "cluster.upgrade.maxUnavailable"}},
		{name: "upgrade drain timeout too short", mutate: func(m map[string]any) {
			at(m, "cluster")["upgrade"] = map[string]any{"drainTimeout": "2s"}
		}, want: []string{"cluster.upgrade.drainTimeout"}},
		{name: "certificate validity garbage", mutate: func(m map[string]any) {
			at(m, "cluster")["certificates"] = map[string]any{"validityPeriod": "1y"}
		}, want: []string{"cluster.certificates.validityPeriod"}},
		{name: "certificate durations negative", mutate: func(m map[string]any) {
			at(m, "cluster")["certificates"] = map[string]any{"validityPeriod": "-10m", "renewBefore": "0s"}
		}, want: []string{"cluster.certificates.renewBefore", "cluster.certificates.validityPeriod"}},
		{name: "renewal not before expiry", mutate: func(m map[string]any) {
			at(m, "cluster")["certificates"] = map[string]any{"validityPeriod": "10m", "renewBefore": "10m"}
		}, want: []string{"cluster.certificates.renewBefore"}},
		{name: "certificates outliving their CA", mutate: func(m map[string]any) {
			at(m, "cluster")["certificates"] = map[string]any{"validityPeriod": "100000h"}
		}, want: []string{"cluster.certificates.validityPeriod"}},
		{name: "certificates unknown field", mutate: func(m map[string]any) {
			at(m, "cluster")["certificates"] = map[string]any{"validity": "10m"}
		}, want: []string{"cluster.certificates.validity"}},
		{name: "cilium chart not an archive", mutate: func(m map[string]any) { at(m, "cluster")["cilium"] = map[string]any{"chart": "/srv/charts/cilium"} }, want: []string{"cluster.cilium.chart"}},
		{name: "nodeCIDR missing", mutate: func(m map[string]any) { delete(at(m, "cluster.network"), "nodeCIDR") }, want: []string{"cluster.network.nodeCIDR"}},
		{name: "nodeCIDR prefix", mutate: func(m map[string]any) { at(m, "cluster.network")["nodeCIDR"] = "10.0.0.0/33" }, want: []string{"cluster.network.nodeCIDR"}},
		{name: "nodeCIDR host bits", mutate: func(m map[string]any) { at(m, "cluster.network")["nodeCIDR"] = "10.0.0.5/24" }, want: []string{"cluster.network.nodeCIDR"}},
		{name: "pod overlaps service", mutate: func(m map[string]any) { at(m, "cluster.network")["podCIDR"] = "10.96.0.0/16" }, want: []string{"cluster.network.podCIDR"}},
		{name: "pod overlaps nodes", mutate: func(m map[string]any) { at(m, "cluster.network")["podCIDR"] = "10.0.0.0/16" }, want: []string{"cluster.network.podCIDR"}},
		{name: "service overlaps nodes", mutate: func(m map[string]any) { at(m, "cluster.network")["serviceCIDR"] = "10.0.0.0/16" }, want: []string{"cluster.network.serviceCIDR"}},
		{name: "service range too large", mutate: func(m map[string]any) { at(m, "cluster.network")["serviceCIDR"] = "172.0.0.0/8" }, want: []string{"cluster.network.serviceCIDR"}},
		{name: "pod range too small", mutate: func(m map[string]any) { at(m, "cluster.network")["podCIDR"] = "10.244.0.0/25" }, want: []string{"cluster.network.podCIDR"}},
		{name: "pod range too few nodes", mutate: func(m map[string]any) { at(m, "cluster.network")["podCIDR"] = "10.244.0.0/23" }, want: []string{"cluster.network.podCIDR"}},
		{name: "dns domain", mutate: func(m map[string]any) { at(m, "cluster.network")["dnsDomain"] = "Cluster Local" }, want: []string{"cluster.network.dnsDomain"}},
		{name: "gateway outside", mutate: func(m map[string]any) { at(m, "cluster.network")["gateway"] = "192.168.1.1" }, want: []string{"cluster.network.gateway"}},
		{name: "gateway not an IP", mutate: func(m map[string]any) { at(m, "cluster.network")["gateway"] = "router" }, want: []string{"cluster.network.gateway"}},
		{name: "nameserver not an IP", mutate: func(m map[string]any) { at(m, "cluster.network")["nameservers"] = []any{"10.0.0.1", "dns.home"} }, want: []string{"cluster.network.nameservers[1]"}},
		{name: "node name", mutate: func(m map[string]any) { at(m, "nodes.0")["name"] = "CP_1" }, want: []string{"nodes[0].name"}},
		{name: "node name missing", mutate: func(m map[string]any) { delete(at(m, "nodes.4"), "name") }, want: []string{"nodes[4].name"}},
		{name: "duplicate name", mutate: func(m map[string]any) { at(m, "nodes.1")["name"] = "cp-1" }, want: []string{"nodes[1].name"}},
		{name: "bad role", mutate: func(m map[string]any) { at(m, "nodes.0")["role"] = "master" }, want: []string{"nodes[0].role"}},
		{name: "missing role", mutate: func(m map[string]any) { delete(at(m, "nodes.3"), "role") }, want: []string{"nodes[3].role"}},
		{name: "address looks like IP", mutate: func(m map[string]any) { at(m, "nodes.2")["address"] = "10.0.0.999" }, want: []string{"nodes[2].address"}},
		{name: "address missing", mutate: func(m map[string]any) { delete(at(m, "nodes.5"), "address") }, want: []string{"nodes[5].address"}},
		{name: "address outside subnet", mutate: func(m map[string]any) { at(m, "nodes.2")["address"] = "10.0.1.122" }, want: []string{"nodes[2].address"}},
		{name: "network address", mutate: func(m map[string]any) { at(m, "nodes.4")["address"] = "10.0.0.0" }, want: []string{"nodes[4].address"}},
		{name: "broadcast address", mutate: func(m map[string]any) { at(m, "nodes.4")["address"] = "10.0.0.255" }, want: []string{"nodes[4].address"}},
		{name: "gateway address", mutate: func(m map[string]any) { at(m, "nodes.4")["address"] = "10.0.0.1" }, want: []string{"nodes[4].address"}},
		{name: "IPv6 address", mutate: func(m map[string]any) { at(m, "nodes.4")["address"] = "fd00::5" }, want: []string{"nodes[4].address"}},
		{name: "duplicate address", mutate: func(m map[string]any) { at(m, "nodes.6")["address"] = "10.0.0.130" }, want: []string{"nodes[6].address"}},
		{name: "bad MAC", mutate: func(m map[string]any) { at(m, "nodes.1")["mac"] = "52:54:00:0a:00" }, want: []string{"nodes[1].mac"}},
		{name: "duplicate MAC", mutate: func(m map[string]any) { at(m, "nodes.2")["mac"] = "52:54:00:0A:00:78" }, want: []string{"nodes[2].mac"}},
		{name: "duplicate MAC in another spelling", mutate: func(m map[string]any) { at(m, "nodes.2")["mac"] = "52-54-00-0a-00-78" }, want: []string{"nodes[2].mac"}},
		{name: "zoned nameserver", mutate: func(m map[string]any) { at(m, "cluster.network")["nameservers"] = []any{"10.0.0.1", "fe80::1%eth0"} }, want: []string{"cluster.network.nameservers[1]"}},
		{name: "interface name too long", mutate: func(m map[string]any) { at(m, "nodes.0")["interface"] = "enp0s31f6-uplink0" }, want: []string{"nodes[0].interface"}},
		{name: "no control plane", mutate: func(m map[string]any) {
			for _, i := range []string{"0", "1", "2"} {
				at(m, "nodes."+i)["role"] = "worker"
			}
		}, want: []string{"nodes"}},
		{name: "no nodes", mutate: func(m map[string]any) { m["nodes"] = []any{} }, want: []string{"nodes"}},
		{name: "vip missing", mutate: func(m map[string]any) { delete(at(m, "cluster.endpoint"), "vip") }, want: []string{"cluster.endpoint.vip"}},
		{name: "vip outside subnet", mutate: func(m map[string]any) { at(m, "cluster.endpoint")["vip"] = "10.0.1.100" }, want: []string{"cluster.endpoint.vip"}},
		{name: "vip is a node", mutate: func(m map[string]any) { at(m, "cluster.endpoint")["vip"] = "10.0.0.120" }, want: []string{"cluster.endpoint.vip"}},
		{name: "vip is the gateway", mutate: func(m map[string]any) { at(m, "cluster.endpoint")["vip"] = "10.0.0.1" }, want: []string{"cluster.endpoint.vip"}},
		{name: "router id", mutate: func(m map[string]any) { at(m, "cluster.vrrp")["routerID"] = 300 }, want: []string{"cluster.vrrp.routerID"}},
		{name: "advert interval", mutate: func(m map[string]any) { at(m, "cluster.vrrp")["advertIntervalMs"] = 5 }, want: []string{"cluster.vrrp.advertIntervalMs"}},
		{name: "vrrp interface", mutate: func(m map[string]any) { at(m, "cluster.vrrp")["interface"] = "eth 0" }, want: []string{"cluster.vrrp.interface"}},
		// Interface names land in keepalived.conf, netplan and shell
		// commands: nothing that ends a line, a word or a block.
		{name: "interface with a newline", mutate: func(m map[string]any) { at(m, "nodes.0")["interface"] = "eth0\n}" }, want: []string{"nodes[0].interface"}},
		{name: "interface with a semicolon", mutate: func(m map[string]any) { at(m, "nodes.1")["interface"] = "eth0;reboot" }, want: []string{"nodes[1].interface"}},
		{name: "interface with a command substitution", mutate: func(m map[string]any) { at(m, "nodes.2")["interface"] = "$(id)" }, want: []string{"nodes[2].interface"}},
		{name: "interface with braces", mutate: func(m map[string]any) { at(m, "nodes.3")["interface"] = "eth{0}" }, want: []string{"nodes[3].interface"}},
		{name: "interface with a quote", mutate: func(m map[string]any) { at(m, "nodes.0")["interface"] = `eth0"` }, want: []string{"nodes[0].interface"}},
		{name: "interface with a hash", mutate: func(m map[string]any) { at(m, "nodes.0")["interface"] = "eth0#x" }, want: []string{"nodes[0].interface"}},
		{name: "interface dot", mutate: func(m map[string]any) { at(m, "nodes.0")["interface"] = "." }, want: []string{"nodes[0].interface"}},
		{name: "vrrp interface with a newline", mutate: func(m map[string]any) { at(m, "cluster.vrrp")["interface"] = "eth0\nvirtual_ipaddress" }, want: []string{"cluster.vrrp.interface"}},
		{name: "vrrp interface with a tab", mutate: func(m map[string]any) { at(m, "cluster.vrrp")["interface"] = "eth0\t" }, want: []string{"cluster.vrrp.interface"}},
		{name: "single-ip unknown node", mutate: func(m map[string]any) {
			at(m, "cluster.endpoint")["layout"] = "single-ip"
			at(m, "cluster.endpoint")["node"] = "cp-9"
		}, want: []string{"cluster.endpoint.node"}},
		{name: "single-ip worker", mutate: func(m map[string]any) {
			at(m, "cluster.endpoint")["layout"] = "single-ip"
			at(m, "cluster.endpoint")["node"] = "gpu-1"
		}, want: []string{"cluster.endpoint.node"}},
		{name: "dns without name", mutate: func(m map[string]any) { at(m, "cluster.endpoint")["layout"] = "dns" }, want: []string{"cluster.endpoint.dnsName"}},
		{name: "dns name invalid", mutate: func(m map[string]any) { at(m, "cluster.endpoint")["dnsName"] = "k8s_api.home!" }, want: []string{"cluster.endpoint.dnsName"}},
		{name: "dns name is an IP-ish", mutate: func(m map[string]any) {
			at(m, "cluster.endpoint")["layout"] = "dns"
			at(m, "cluster.endpoint")["dnsName"] = "10.0.0.300"
		}, want: []string{"cluster.endpoint.dnsName"}},
		{name: "layout", mutate: func(m map[string]any) { at(m, "cluster.endpoint")["layout"] = "ha" }, want: []string{"cluster.endpoint.layout"}},
		{name: "port range", mutate: func(m map[string]any) { at(m, "cluster.endpoint")["port"] = 70000 }, want: []string{"cluster.endpoint.port"}},
		// The VIP is an API SAN in every layout: a name, a foreign address or
		// a node's own address would be signed into the API certificate.
		{name: "dns layout vip a name", mutate: func(m map[string]any) {
			at(m, "cluster.endpoint")["layout"] = "dns"
			at(m, "cluster.endpoint")["dnsName"] = "k8s.home.arpa"
			at(m, "cluster.endpoint")["vip"] = "evil.example.com"
		}, want: []string{"cluster.endpoint.vip"}},
		{name: "single-ip layout vip outside subnet", mutate: func(m map[string]any) {
			at(m, "cluster.endpoint")["layout"] = "single-ip"
			at(m, "cluster.endpoint")["vip"] = "192.168.1.1"
		}, want: []string{"cluster.endpoint.vip"}},
		{name: "dns layout vip a node", mutate: func(m map[string]any) {
			at(m, "cluster.endpoint")["layout"] = "dns"
			at(m, "cluster.endpoint")["dnsName"] = "k8s.home.arpa"
			at(m, "cluster.endpoint")["vip"] = "10.0.0.121"
		}, want: []string{"cluster.endpoint.vip"}},
		{name: "service range without room for CoreDNS", mutate: func(m map[string]any) { at(m, "cluster.network")["serviceCIDR"] = "10.96.0.0/29" }, want: []string{"cluster.network.serviceCIDR"}},
		{name: "service range of one address", mutate: func(m map[string]any) { at(m, "cluster.network")["serviceCIDR"] = "10.96.0.0/32" }, want: []string{"cluster.network.serviceCIDR"}},
		{name: "kube-proxy mode", mutate: func(m map[string]any) { at(m, "cluster.kubeProxy")["mode"] = "bogus" }, want: []string{"cluster.kubeProxy.mode"}},
		{name: "kube-proxy replacement", mutate: func(m map[string]any) { at(m, "cluster.kubeProxy")["replacement"] = "calico" }, want: []string{"cluster.kubeProxy.replacement"}},
		{name: "kube-proxy conntrack", mutate: func(m map[string]any) { at(m, "cluster.kubeProxy")["conntrackMaxPerCore"] = -1 }, want: []string{"cluster.kubeProxy.conntrackMaxPerCore"}},
		{name: "cni", mutate: func(m map[string]any) { at(m, "cluster")["cni"] = "calico" }, want: []string{"cluster.cni"}},
		{name: "no CNI to replace kube-proxy", mutate: func(m map[string]any) { at(m, "cluster")["cni"] = "none" }, want: []string{"cluster.cni"}},
		{name: "extra SAN bad IP", mutate: func(m map[string]any) { at(m, "cluster")["extraSANs"] = []any{"10.0.0.999"} }, want: []string{"cluster.extraSANs[0]"}},
		{name: "extra SAN bad name", mutate: func(m map[string]any) { at(m, "cluster")["extraSANs"] = []any{"k8s.home", "not a name"} }, want: []string{"cluster.extraSANs[1]"}},
		{name: "cri socket", mutate: func(m map[string]any) { at(m, "cluster")["criSocket"] = "tcp://10.0.0.1:1234" }, want: []string{"cluster.criSocket"}},
		{name: "managed runtime on another socket", mutate: func(m map[string]any) {
			at(m, "cluster")["criSocket"] = "/var/run/crio/crio.sock"
			at(m, "cluster")["containerRuntime"] = map[string]any{"manage": true}
		}, want: []string{"cluster.criSocket"}},
		{name: "mirror not a URL", mutate: func(m map[string]any) { at(m, "cluster")["registry"] = map[string]any{"mirror": "10.0.0.2:5000"} }, want: []string{"cluster.registry.mirror"}},
		{name: "mirror with a path", mutate: func(m map[string]any) {
			at(m, "cluster")["registry"] = map[string]any{"mirror": "https://mirror.lan/v2/"}
		}, want: []string{"cluster.registry.mirror"}},
		{name: "mirrored host not a registry", mutate: func(m map[string]any) {
			at(m, "cluster")["registry"] = map[string]any{"mirrors": map[string]any{"https://ghcr.io": "http://10.0.0.2:5000", "quay.io": "ftp://10.0.0.2"}}
		}, want: []string{`cluster.registry.mirrors["https://ghcr.io"]`, `cluster.registry.mirrors["quay.io"]`}},
		{name: "runtime packages without manage", mutate: func(m map[string]any) {
			at(m, "cluster")["containerRuntime"] = map[string]any{"manage": false, "packages": map[string]any{"containerd": "1.7.28-1", "runc": "1.1.12-1"}}
		}, want: []string{"cluster.containerRuntime.packages"}},
		{name: "runtime packages not apt versions", mutate: func(m map[string]any) {
			at(m, "cluster")["containerRuntime"] = map[string]any{"manage": true, "packages": map[string]any{"containerd": "latest", "runc": ""}}
		}, want: []string{"cluster.containerRuntime.packages.containerd", "cluster.containerRuntime.packages.runc"}},
		{name: "containerd the kubelet cannot run on", mutate: func(m map[string]any) {
			at(m, "cluster")["containerRuntime"] = map[string]any{"manage": true, "packages": map[string]any{"containerd": "1.5.9-ubuntu1", "runc": "1.1.12-1"}}
		}, want: []string{"cluster.containerRuntime.packages.containerd"}},
		{name: "containerd 1.x under v1.36", mutate: func(m map[string]any) {
			at(m, "cluster")["kubernetesVersion"] = "v1.36.0"
			at(m, "cluster")["containerRuntime"] = map[string]any{"manage": true, "packages": map[string]any{"containerd": "1.7.28-0ubuntu1~24.04.1", "runc": "1.3.3-0ubuntu1~24.04.2"}}
		}, want: []string{"cluster.containerRuntime.packages.containerd", "cluster.kubernetesVersion"}},
		{name: "containerd 3.x, whose configuration up does not write", mutate: func(m map[string]any) {
			at(m, "cluster")["containerRuntime"] = map[string]any{"manage": true, "packages": map[string]any{"containerd": "3.0.0-1", "runc": "1.3.3-1"}}
		}, want: []string{"cluster.containerRuntime.packages.containerd"}},
		{name: "Docker's repository, every field wrong", mutate: func(m map[string]any) {
			at(m, "cluster")["containerRuntime"] = map[string]any{"manage": true, "packages": map[string]any{"containerd": "2.2.1-1", "runc": "1.3.3-1",
				"repository": map[string]any{"url": "download.docker.com/linux/debian", "suite": "Debian 12", "component": "stable main"}}}
		}, want: []string{"cluster.containerRuntime.packages.repository.component", "cluster.containerRuntime.packages.repository.suite",
			"cluster.containerRuntime.packages.repository.url", "cluster.containerRuntime.packages.runc"}},
		{name: "Docker's repository over http without its key", mutate: func(m map[string]any) {
			at(m, "cluster")["containerRuntime"] = map[string]any{"manage": true, "packages": map[string]any{"containerd": "2.2.1-1",
				"repository": map[string]any{"url": "http://mirror.lan/docker/linux/debian"}}}
		}, want: []string{"cluster.containerRuntime.packages.repository.keyring", "cluster.containerRuntime.packages.repository.suite"}},
		{name: "runtime manage not a bool", mutate: func(m map[string]any) { at(m, "cluster")["containerRuntime"] = map[string]any{"manage": "yes please"} }, want: []string{"cluster.containerRuntime.manage"}},
		{name: "label key", mutate: func(m map[string]any) { at(m, "nodes.3")["labels"] = map[string]any{"bad key": "x"} }, want: []string{`nodes[3].labels["bad key"]`}},
		{name: "label value", mutate: func(m map[string]any) { at(m, "nodes.3")["labels"] = map[string]any{"tier": "a b"} }, want: []string{`nodes[3].labels["tier"]`}},
		{name: "taint", mutate: func(m map[string]any) { at(m, "nodes.3")["taints"] = []any{"dedicated=gpu"} }, want: []string{"nodes[3].taints[0]"}},
		{name: "gpu vendor", mutate: func(m map[string]any) { at(m, "nodes.3.gpus")["vendor"] = "amd" }, want: []string{"nodes[3].gpus.vendor"}},
		{name: "gpu count", mutate: func(m map[string]any) { at(m, "nodes.3.gpus")["count"] = -1 }, want: []string{"nodes[3].gpus.count"}},
		{name: "unknown gpu field", mutate: func(m map[string]any) { at(m, "cluster")["gpu"] = map[string]any{"toolkitVerison": "1.20.0-1"} }, want: []string{"cluster.gpu.toolkitVerison"}},
		{name: "toolkit version without revision", mutate: func(m map[string]any) { at(m, "cluster")["gpu"] = map[string]any{"toolkitVersion": "1.20.0"} }, want: []string{"cluster.gpu.toolkitVersion"}},
		{name: "toolkit version not a version", mutate: func(m map[string]any) {
			at(m, "cluster")["gpu"] = map[string]any{"toolkitVersion": "1.20.0-1 && reboot"}
		}, want: []string{"cluster.gpu.toolkitVersion"}},
		{name: "device plugin version without v", mutate: func(m map[string]any) {
			at(m, "cluster")["gpu"] = map[string]any{"devicePlugin": map[string]any{"enabled": true, "version": "0.20.1"}}
		}, want: []string{"cluster.gpu.devicePlugin.version"}},
		{name: "device plugin enabled not a bool", mutate: func(m map[string]any) {
			at(m, "cluster")["gpu"] = map[string]any{"devicePlugin": map[string]any{"enabled": "on"}}
		}, want: []string{"cluster.gpu.devicePlugin.enabled"}},
		{name: "packages repository not a URL", mutate: func(m map[string]any) {
			at(m, "cluster")["packages"] = map[string]any{"manage": true, "repository": "pkgs.k8s.io/core:/stable:/{minor}/deb/"}
		}, want: []string{"cluster.packages.repository"}},
		{name: "packages repository with a space", mutate: func(m map[string]any) {
			at(m, "cluster")["packages"] = map[string]any{"repository": "https://mirror.home/k8s/{minor}/ main"}
		}, want: []string{"cluster.packages.repository"}},
		{name: "packages repository with a bracket", mutate: func(m map[string]any) {
			at(m, "cluster")["packages"] = map[string]any{"repository": "[trusted=yes] https://mirror.home/{minor}/"}
		}, want: []string{"cluster.packages.repository"}},
		{name: "packages repository scheme", mutate: func(m map[string]any) {
			at(m, "cluster")["packages"] = map[string]any{"repository": "ftp://mirror.home/{minor}/"}
		}, want: []string{"cluster.packages.repository"}},
		{name: "packages repository without host", mutate: func(m map[string]any) {
			at(m, "cluster")["packages"] = map[string]any{"repository": "https:///{minor}/"}
		}, want: []string{"cluster.packages.repository"}},
		{name: "packages repository with credentials", mutate: func(m map[string]any) {
			at(m, "cluster")["packages"] = map[string]any{"repository": "https://me:secret@mirror.home/{minor}/"}
		}, want: []string{"cluster.packages.repository"}},
		{name: "packages http repository without keyring", mutate: func(m map[string]any) {
			at(m, "cluster")["packages"] = map[string]any{"manage": true, "repository": "http://mirror.home/core:/stable:/{minor}/deb/"}
		}, want: []string{"cluster.packages.keyring"}},
		{name: "packages manage not a bool", mutate: func(m map[string]any) {
			at(m, "cluster")["packages"] = map[string]any{"manage": "yes"}
		}, want: []string{"cluster.packages.manage"}},
		{name: "packages unknown field", mutate: func(m map[string]any) {
			at(m, "cluster")["packages"] = map[string]any{"repo": "https://mirror.home/{minor}/"}
		}, want: []string{"cluster.packages.repo"}},
		{name: "ssh port", mutate: func(m map[string]any) { at(m, "ssh")["port"] = 99999 }, want: []string{"ssh.port"}},
		{name: "every problem at once", mutate: func(m map[string]any) {
			at(m, "cluster.endpoint")["vip"] = "10.0.0.999"
			at(m, "cluster.network")["podCIDR"] = "10.96.0.0/16"
			at(m, "nodes.2")["address"] = "10.0.1.5"
			at(m, "cluster")["extraSANs"] = []any{"1.2.3.4.5"}
		}, want: []string{"cluster.endpoint.vip", "cluster.extraSANs[0]", "cluster.network.podCIDR", "nodes[2].address"}},
	}
	if len(cases) < 40 {
		t.Fatalf("only %d bad inventories", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.raw)
			if tc.mutate != nil {
				m := baseDoc(t)
				tc.mutate(m)
				var err error
				if data, err = yaml.Marshal(m); err != nil {
					t.Fatal(err)
				}
			}
			inv, _, err := Parse(data)
			if err == nil {
				t.Fatalf("accepted:\n%s", data)
			}
			if inv != nil {
				t.Error("returned an inventory along with the error")
			}
			got := paths(Problems(err))
			if !slices.Equal(got, tc.want) {
				t.Errorf("reported %q, want %q\n%v", got, tc.want, err)
			}
			// One problem per line, each starting with its field path.
			lines := strings.Split(err.Error(), "\n")
			for _, p := range Problems(err) {
				if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, p.Path) }) {
					t.Errorf("no line starts with %q:\n%v", p.Path, err)
				}
			}
		})
	}
}

// An API port another control-plane component or sshd already listens on
// makes the apiserver fail to bind on every control-plane node: refused,
// naming the port's owner, each with the other problems.
func TestAPIPortCollisions(t *testing.T) {
	for port, owner := range map[int]string{2379: "etcd", 2380: "etcd", 10250: "kubelet", 10248: "kubelet", 10256: "kube-proxy", 10257: "controller-manager", 10259: "scheduler", 22: "ssh"} {
		m := baseDoc(t)
		at(m, "cluster.endpoint")["port"] = port
		at(m, "cluster.network")["serviceCIDR"] = "10.96.0.0/30"
		_, _, err := Parse(marshal(t, m))
		got := paths(Problems(err))
		if !slices.Equal(got, []string{"cluster.endpoint.port", "cluster.network.serviceCIDR"}) {
			t.Errorf("port %d: reported %q\n%v", port, got, err)
			continue
		}
		for _, p := range Problems(err) {
			if p.Path == "cluster.endpoint.port" && (!strings.Contains(p.Message, owner) || !strings.Contains(p.Message, "6443")) {
				t.Errorf("port %d: the problem names neither %s nor the usual port: %s", port, owner, p.Message)
			}
		}
	}
	m := baseDoc(t)
	at(m, "cluster.endpoint")["port"] = 2222
	at(m, "ssh")["port"] = 2222
	if _, _, err := Parse(marshal(t, m)); !slices.Equal(paths(Problems(err)), []string{"cluster.endpoint.port"}) {
		t.Errorf("the API on ssh.port: %v", err)
	}
	at(m, "cluster.endpoint")["port"] = 8443
	if _, _, err := Parse(marshal(t, m)); err != nil {
		t.Errorf("8443: %v", err)
	}
}

// A VIP kept in another layout (so moving to vip needs no new
// certificate) that is a valid free address stays accepted.
func TestVIPKeptInOtherLayouts(t *testing.T) {
	for _, layout := range []string{"dns", "single-ip"} {
		m := baseDoc(t)
		at(m, "cluster.endpoint")["layout"] = layout
		at(m, "cluster.endpoint")["dnsName"] = "k8s.home.arpa"
		if _, _, err := Parse(marshal(t, m)); err != nil {
			t.Errorf("%s with vip 10.0.0.100: %v", layout, err)
		}
	}
}

func TestUnknownFieldNamesItsLine(t *testing.T) {
	data, _ := os.ReadFile("homelab.yaml")
	bad := strings.Replace(string(data), "    port: 6443", "    port: 6443\n    prot: 6443", 1)
	_, _, err := Parse([]byte(bad))
	ps := Problems(err)
	if len(ps) != 1 || ps[0].Path != "cluster.endpoint.prot" {
		t.Fatalf("got %v", err)
	}
	want := strings.Count(bad[:strings.Index(bad, "prot:")], "\n") + 1
	if ps[0].Line != want {
		t.Errorf("line %d, want %d", ps[0].Line, want)
	}
}

func TestProblemsCarryLines(t *testing.T) {
	data, _ := os.ReadFile("homelab.yaml")
	bad := strings.Replace(string(data), "address: 10.0.0.131", "address: 10.0.0.999", 1)
	_, _, err := Parse([]byte(bad))
	ps := Problems(err)
	if len(ps) != 1 || ps[0].Path != "nodes[4].address" || ps[0].Line == 0 {
		t.Fatalf("got %+v", ps)
	}
	if !strings.Contains(bad, "\n") || strings.Split(bad, "\n")[ps[0].Line-1] == "" {
		t.Errorf("line %d is not the address line", ps[0].Line)
	}
	if !strings.Contains(strings.Split(bad, "\n")[ps[0].Line-1], "10.0.0.999") {
		t.Errorf("line %d is %q", ps[0].Line, strings.Split(bad, "\n")[ps[0].Line-1])
	}
}

func TestWarnings(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(m map[string]any)
		want   []string
	}{
		{"even control planes", func(m map[string]any) { at(m, "nodes.2")["role"] = "worker" }, []string{"nodes"}},
		// homelab.yaml runs Cilium: then the pod network depends on the node too.
		{"single-ip depends on one node", func(m map[string]any) { at(m, "cluster.endpoint")["layout"] = "single-ip" }, []string{"cluster.endpoint.layout", "cluster.kubeProxy.replacement"}},
		{"single-ip with kube-proxy", func(m map[string]any) {
			at(m, "cluster.endpoint")["layout"] = "single-ip"
			at(m, "cluster.kubeProxy")["replacement"] = "none"
		}, []string{"cluster.endpoint.layout"}},
		{"untested version", func(m map[string]any) { at(m, "cluster")["kubernetesVersion"] = "v1.33.2" }, []string{"cluster.kubernetesVersion"}},
		{"bring your own CNI", func(m map[string]any) {
			at(m, "cluster")["cni"] = "none"
			at(m, "cluster.kubeProxy")["replacement"] = "none"
		}, []string{"cluster.cni"}},
		{"gpu on control plane", func(m map[string]any) { at(m, "nodes.0")["gpus"] = map[string]any{"vendor": "nvidia"} }, []string{"nodes[0].gpus"}},
		{"device plugin with no GPU node", func(m map[string]any) {
			at(m, "cluster")["gpu"] = map[string]any{"devicePlugin": map[string]any{"enabled": true}}
			for _, i := range []string{"3", "4", "5", "6"} {
				delete(at(m, "nodes."+i), "gpus")
			}
		}, []string{"cluster.gpu.devicePlugin.enabled"}},
		{"containerd not tested with the minor", func(m map[string]any) {
			at(m, "cluster")["containerRuntime"] = map[string]any{"manage": true, "packages": map[string]any{"containerd": "1.6.20~ds1-1+deb12u3", "runc": "1.1.5+ds1-1+deb12u1"}}
		}, []string{"cluster.containerRuntime.packages.containerd"}},
		{"adverts too fast to be flap-free", func(m map[string]any) { at(m, "cluster.vrrp")["advertIntervalMs"] = 100 }, []string{"cluster.vrrp.advertIntervalMs"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := baseDoc(t)
			tc.mutate(m)
			data, _ := yaml.Marshal(m)
			_, warnings, err := Parse(data)
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if got := paths(warnings); !slices.Equal(got, tc.want) {
				t.Errorf("warned %q, want %q: %v", got, tc.want, warnings)
			}
		})
	}
}

// An apt version's upstream part: what containerd's matrix is read with.
func TestUpstreamVersion(t *testing.T) {
	for in, want := range map[string]string{
		"1.6.20~ds1-1+deb12u3":    "1.6.20~ds1",
		"1.7.28-0ubuntu1~24.04.1": "1.7.28",
		"1:2.1.5-1":               "2.1.5",
		"1.7.28":                  "1.7.28",
	} {
		if got := UpstreamVersion(in); got != want {
			t.Errorf("UpstreamVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEvenControlPlaneWarningSaysWhatQuorumSurvives(t *testing.T) {
	for _, tc := range []struct {
		cps  int
		want string
	}{{2, "survives 0 failure"}, {4, "survives 1 failure"}} {
		m := baseDoc(t)
		nodes := m["nodes"].([]any)
		for i := range nodes {
			role := "worker"
			if i < tc.cps {
				role = "control-plane"
			}
			nodes[i].(map[string]any)["role"] = role
		}
		data, _ := yaml.Marshal(m)
		_, warnings, err := Parse(data)
		i := slices.IndexFunc(warnings, func(p *Problem) bool { return p.Path == "nodes" })
		if err != nil || i < 0 || !strings.Contains(warnings[i].Message, tc.want) {
			t.Errorf("%d control planes: %v %v", tc.cps, warnings, err)
		}
	}
}

// A MAC spelled with dashes, dots or capitals is the same NIC: the loaded
// inventory holds the one form netplan accepts, so the netplan file and
// every comparison with a node's live MACs see six colon-separated pairs.
func TestMACsAreLoadedInNetplansForm(t *testing.T) {
	for _, mac := range []string{"52:54:00:0a:00:7b", "52-54-00-0A-00-7B", "5254.000a.007b", "52:54:00:0A:00:7B"} {
		inv, _, err := Parse([]byte(`
cluster:
  endpoint: {vip: 10.0.0.100}
  network: {nodeCIDR: 10.0.0.0/24, gateway: 10.0.0.1}
nodes:
  - {name: cp-1, role: control-plane, address: 10.0.0.120, mac: "` + mac + `"}
`))
		if err != nil {
			t.Fatalf("%s: %v", mac, err)
		}
		if got := inv.Nodes[0].MAC; got != "52:54:00:0a:00:7b" {
			t.Errorf("%s loads as %q, want 52:54:00:0a:00:7b", mac, got)
		}
	}
}

func TestDefaults(t *testing.T) {
	inv, _, err := Parse([]byte(`
cluster:
  endpoint: {vip: 10.0.0.100}
  network: {nodeCIDR: 10.0.0.0/24, gateway: 10.0.0.1}
nodes:
  - {name: cp-1, role: control-plane, address: 10.0.0.120}
`))
	if err != nil {
		t.Fatal(err)
	}
	c := inv.Cluster
	if c.Endpoint.Layout != LayoutVIP || c.Endpoint.Port != 6443 || c.Endpoint.Node != "cp-1" ||
		c.KubernetesVersion != DefaultKubernetesVersion || c.Network.PodCIDR != DefaultPodCIDR ||
		c.KubeProxy.Replacement != ReplacementNone || c.KubeProxy.Mode != "iptables" ||
		inv.SSH.User != "root" || inv.SSH.Port != 22 || inv.Nodes[0].Interface != "eth0" ||
		len(c.Network.Nameservers) != 1 || inv.Endpoint() != "10.0.0.100:6443" ||
		c.GPU.ToolkitVersion != DefaultToolkitVersion || c.GPU.DevicePlugin.Enabled || c.GPU.DevicePlugin.Version != DefaultDevicePluginVersion {
		t.Errorf("defaults not applied: %+v %+v", c, inv.SSH)
	}
}
