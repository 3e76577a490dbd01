package ciliumagent

import (
	"encoding/json"
	"net"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/homelab-dev/homelab/infra/cniconf"
)

func node(name, cidr, ip string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDR: cidr}}
	if ip != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
	}
	return n
}

// Every other node's pod CIDR goes via its internal address; a node
// without a pod CIDR or an address yet is left for a later sync.
func TestPeerRoutes(t *testing.T) {
	routes, own := peerRoutes([]corev1.Node{
		node("cp-1", "10.244.0.0/24", "10.77.0.120"),
		node("gpu-1", "10.244.1.0/24", "10.77.0.130"),
		node("gpu-2", "", "10.77.0.131"),
		node("gpu-3", "10.244.3.0/24", ""),
	}, "cp-1")
	if own != "10.244.0.0/24" {
		t.Errorf("own pod CIDR %q", own)
	}
	if len(routes) != 1 || !routes["10.244.1.0/24"].Equal(net.ParseIP("10.77.0.130")) {
		t.Errorf("routes %v", routes)
	}
}

// The configuration is one containerd's loader takes as the network
// (cniconf, its rules), of the reference plugins the image installs, with
// addresses from the node's pod CIDR.
func TestPodConflist(t *testing.T) {
	conf, err := podConflist("10.244.1.0/24")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cniconf.Parse(ConfigFile, []byte(conf)); err != nil {
		t.Fatalf("%v\n%s", err, conf)
	}
	var got struct {
		Plugins []struct {
			Type string `json:"type"`
			IPAM struct {
				Type   string `json:"type"`
				Ranges [][]struct {
					Subnet string `json:"subnet"`
				} `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(conf), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Plugins) != 2 || got.Plugins[0].Type != "ptp" || got.Plugins[0].IPAM.Type != "host-local" || got.Plugins[0].IPAM.Ranges[0][0].Subnet != "10.244.1.0/24" || got.Plugins[1].Type != "portmap" {
		t.Errorf("conflist: %s", conf)
	}
	for _, p := range got.Plugins {
		found := false
		for _, q := range Plugins {
			found = found || q == p.Type
		}
		if !found {
			t.Errorf("the conflist uses %s, which the image does not install", p.Type)
		}
	}
	if _, err := podConflist("not a cidr"); err == nil {
		t.Error("a pod CIDR that is none was taken")
	}
}
