package impact

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/pki"
)

func load(t *testing.T, edit func(*inventory.Inventory)) *inventory.Inventory {
	t.Helper()
	inv, _, err := inventory.Load("../../inventory/lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(inv)
	}
	if _, err := inventory.Validate(inv); err != nil {
		t.Fatal(err)
	}
	return inv
}

func bundle(t *testing.T) *pki.Bundle {
	t.Helper()
	data, err := os.ReadFile("../testdata/bundle.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := pki.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func predict(t *testing.T, layout string, edit func(*inventory.Inventory)) *Prediction {
	t.Helper()
	inv := load(t, func(inv *inventory.Inventory) {
		inv.Cluster.Endpoint.Layout = layout
		if edit != nil {
			edit(inv)
		}
	})
	p, err := ForInventory(inv, bundle(t))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func outcome(t *testing.T, p *Prediction, failure string) Outcome {
	t.Helper()
	for _, o := range p.Outcomes {
		if o.Failure.ID == failure {
			return o
		}
	}
	t.Fatalf("%s: no failure %q", p.Layout, failure)
	return Outcome{}
}

func TestPredict(t *testing.T) {
	withDNS := func(inv *inventory.Inventory) { inv.Cluster.Endpoint.DNSName = "api.homelab.lan" }
	withCilium := func(inv *inventory.Inventory) { inv.Cluster.KubeProxy.Replacement = inventory.ReplacementCilium }
	cases := []struct {
		name, layout string
		edit         func(*inventory.Inventory)
		failure      string
		quorum       bool
		writable     bool
		vip          string
		cells        map[string]string
	}{
		{"vip: cp-1 off, the VIP moves, everyone keeps access", "vip", nil, "off cp-1", true, true, "cp-2", map[string]string{
			"kubectl": OK, "cluster-info": OK, "kube-proxy": OK, "kubelet/gpu-1": OK, "kubelet/cp-2": OK,
			"kubelet/cp-1": Gone, "controller-manager/cp-2": OK, "apiserver-etcd/cp-3": OK, "apiserver-etcd/cp-1": Gone}},
		{"vip: a worker off touches only its kubelet", "vip", nil, "off gpu-1", true, true, "cp-1", map[string]string{
			"kubectl": OK, "kubelet/gpu-1": Gone, "kubelet/gpu-2": OK}},
		{"single-ip: the seed's incident, data kept and access lost", "single-ip", nil, "off cp-1", true, true, "", map[string]string{
			"kubectl": Down, "cluster-info": Down, "kube-proxy": Down, "kubelet/gpu-1": Down, "kubelet/gpu-4": Down,
			"kubelet/cp-2": OK, "controller-manager/cp-2": OK, "scheduler/cp-3": OK, "apiserver-etcd/cp-2": OK, "kubelet/cp-1": Gone}},
		{"single-ip: another control-plane node off costs nothing", "single-ip", nil, "off cp-2", true, true, "", map[string]string{
			"kubectl": OK, "kubelet/gpu-1": OK, "kubelet/cp-2": Gone}},
		{"two control-plane nodes off: no quorum in any layout", "vip", nil, "off cp-1+cp-2", false, false, "cp-3", map[string]string{
			"kubectl": Down, "kubelet/cp-3": Down, "apiserver-etcd/cp-3": Down, "kubelet/gpu-1": Down}},
		{"keepalived dead on the holder: the VIP moves, nothing lost", "vip", nil, "keepalived dead on VIP holder", true, true, "cp-2", map[string]string{
			"kubectl": OK, "kubelet/cp-1": OK}},
		{"keepalived failure does not exist without keepalived", "single-ip", nil, "keepalived dead on VIP holder", true, true, "", map[string]string{
			"kubectl": NA}},
		{"vip: the holder cut off, the LAN follows the VIP, the island loses etcd", "vip", nil, "cut cp-1", true, true, "cp-2", map[string]string{
			"kubectl": OK, "kubelet/gpu-1": OK, "kubelet/cp-1": Down, "apiserver-etcd/cp-1": Down, "kubelet/cp-2": OK}},
		{"single-ip: the endpoint node cut off", "single-ip", nil, "cut cp-1", true, true, "", map[string]string{
			"kubectl": Down, "kubelet/gpu-1": Down, "kubelet/cp-1": Down, "kubelet/cp-2": OK}},
		{"dns: access waits for the record to change", "dns", withDNS, "off cp-1", true, true, "", map[string]string{
			"kubectl": Manual, "kubelet/gpu-1": Manual, "kubelet/cp-2": OK}},
		{"dns: a worker off changes no record", "dns", withDNS, "off gpu-2", true, true, "", map[string]string{
			"kubectl": OK}},
		{"cilium pinned to cp-1 by single-ip", "single-ip", withCilium, "off cp-1", true, true, "", map[string]string{
			"cilium": Down}},
		{"cilium through the VIP", "vip", withCilium, "off cp-1", true, true, "cp-2", map[string]string{
			"cilium": OK}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := outcome(t, predict(t, tc.layout, tc.edit), tc.failure)
			if o.Quorum != tc.quorum || o.Writable != tc.writable || o.VIP != tc.vip {
				t.Errorf("quorum %v writable %v VIP %q, want %v %v %q", o.Quorum, o.Writable, o.VIP, tc.quorum, tc.writable, tc.vip)
			}
			for id, want := range tc.cells {
				c, ok := o.Cell(id)
				if !ok {
					t.Errorf("no cell for %s", id)
					continue
				}
				if c.State != want {
					t.Errorf("%s: %s (%s), want %s", id, c.State, c.Why, want)
				}
			}
		})
	}
}

// The addresses are read from the render, and kubeadm's rules applied.
func TestConsumers(t *testing.T) {
	cases := []struct {
		layout string
		edit   func(*inventory.Inventory)
		want   map[string]string // consumer -> address
		risky  []string
	}{
		{"vip", nil, map[string]string{
			"kubectl": "10.77.0.100:6443", "cluster-info": "10.77.0.100:6443", "kube-proxy": "10.77.0.100:6443",
			"kubelet/gpu-1": "10.77.0.100:6443", "kubelet/cp-1": "10.77.0.120:6443", "kubelet/cp-2": "10.77.0.121:6443",
			"controller-manager/cp-3": "10.77.0.122:6443", "scheduler/cp-1": "10.77.0.120:6443", "apiserver-etcd/cp-2": "127.0.0.1:2379"}, nil},
		{"single-ip", nil, map[string]string{
			"kubectl": "10.77.0.120:6443", "kubelet/gpu-3": "10.77.0.120:6443", "kubelet/cp-2": "10.77.0.121:6443"},
			[]string{"cluster-info", "kube-proxy", "kubectl", "kubelet/gpu-1", "kubelet/gpu-2", "kubelet/gpu-3", "kubelet/gpu-4"}},
		{"single-ip", func(inv *inventory.Inventory) { inv.Cluster.Endpoint.Node = "cp-2" }, map[string]string{
			"kubectl": "10.77.0.121:6443"},
			[]string{"cluster-info", "kube-proxy", "kubectl", "kubelet/gpu-1", "kubelet/gpu-2", "kubelet/gpu-3", "kubelet/gpu-4"}},
	}
	for _, tc := range cases {
		p := predict(t, tc.layout, tc.edit)
		got := map[string]string{}
		for _, c := range p.Consumers {
			got[c.ID] = c.Address
		}
		if len(p.Consumers) != 1+1+7+3+3+1+3 {
			t.Errorf("%s: %d consumers", tc.layout, len(p.Consumers))
		}
		for id, want := range tc.want {
			if got[id] != want {
				t.Errorf("%s: %s dials %q, want %q", tc.layout, id, got[id], want)
			}
		}
		var risky []string
		for _, r := range p.Risks() {
			risky = append(risky, r.ID)
		}
		if strings.Join(risky, " ") != strings.Join(tc.risky, " ") {
			t.Errorf("%s: risky %v, want %v", tc.layout, risky, tc.risky)
		}
	}
}

func TestOutputs(t *testing.T) {
	ps := []*Prediction{predict(t, "vip", nil), predict(t, "single-ip", nil)}
	var table, md, js, svg bytes.Buffer
	for _, f := range []func() error{
		func() error { return WriteTable(&table, ps) },
		func() error { return WriteMarkdown(&md, ps) },
		func() error { return WriteJSON(&js, ps) },
		func() error { return WriteSVG(&svg, ps) },
	} {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(table.String(), "off cp-1") || !strings.Contains(md.String(), "| failure |") {
		t.Errorf("table or markdown lacks the failures")
	}
	var back []*Prediction
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back) != 2 || len(back[1].Outcomes) != len(ps[1].Outcomes) {
		t.Errorf("JSON does not round-trip: %v", err)
	}
	// Well-formed XML, one rect per cell plus the data columns and legend.
	dec := xml.NewDecoder(bytes.NewReader(svg.Bytes()))
	rects := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("SVG is not well-formed: %v", err)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			rects++
		}
	}
	want := 1 + 5
	for _, p := range ps {
		want += len(p.Outcomes) * (len(p.Consumers) + 2)
	}
	if rects != want {
		t.Errorf("SVG has %d rects, want %d", rects, want)
	}
}
