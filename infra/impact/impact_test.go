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
	data, err := os.ReadFile("../../roles/testdata/bundle.yaml")
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
	// data: etcd members healthy/up, quorum, data state; vip: holder,
	// every holder, holder after recovery.
	type data struct {
		healthy, up int
		quorum      bool
		state       string
	}
	type vip struct{ holder, holders, after string }
	full, lostOne := data{3, 3, true, DataWritable}, data{2, 2, true, DataWritable}
	cases := []struct {
		name, layout string
		edit         func(*inventory.Inventory)
		failure      string
		data         data
		vip          vip
		cells        map[string]string
	}{
		{"vip: cp-1 off, the VIP moves and comes back, everyone keeps access", "vip", nil, "off cp-1", lostOne, vip{"cp-2", "cp-2", "cp-1"}, map[string]string{
			"kubectl": OK, "cluster-info": OK, "kube-proxy": OK, "kubelet/gpu-1": OK, "kubelet/cp-2": OK,
			"kubelet/cp-1": Gone, "controller-manager/cp-2": OK, "apiserver-etcd/cp-3": OK, "apiserver-etcd/cp-1": Gone}},
		{"vip: a worker off touches only its kubelet", "vip", nil, "off gpu-1", full, vip{"cp-1", "cp-1", "cp-1"}, map[string]string{
			"kubectl": OK, "kubelet/gpu-1": Gone, "kubelet/gpu-2": OK}},
		{"single-ip: the seed's incident, data kept and access lost", "single-ip", nil, "off cp-1", lostOne, vip{}, map[string]string{
			"kubectl": Down, "cluster-info": Down, "kube-proxy": Down, "kubelet/gpu-1": Down, "kubelet/gpu-4": Down,
			"kubelet/cp-2": OK, "controller-manager/cp-2": OK, "scheduler/cp-3": OK, "apiserver-etcd/cp-2": OK, "kubelet/cp-1": Gone}},
		{"single-ip: another control-plane node off costs nothing", "single-ip", nil, "off cp-2", lostOne, vip{}, map[string]string{
			"kubectl": OK, "kubelet/gpu-1": OK, "kubelet/cp-2": Gone}},
		{"two control-plane nodes off: no quorum, the survivor's data read-only", "vip", nil, "off cp-1+cp-2", data{0, 1, false, DataReadOnly}, vip{"cp-3", "cp-3", "cp-1"}, map[string]string{
			"kubectl": Down, "kubelet/cp-3": Down, "apiserver-etcd/cp-3": Down, "kubelet/gpu-1": Down, "kubelet/cp-1": Gone}},
		{"single-ip: two nodes off but the endpoint's", "single-ip", nil, "off cp-2+cp-3", data{0, 1, false, DataReadOnly}, vip{}, map[string]string{
			"kubectl": Down, "kubelet/cp-1": Down, "apiserver-etcd/cp-1": Down}},
		{"keepalived killed on the holder: the VIP moves, and leaves with keepalived (the drop-in's ExecStopPost)", "vip", nil, "keepalived dead on cp-1", full, vip{"cp-2", "cp-2", "cp-1"}, map[string]string{
			"kubectl": OK, "kubelet/cp-1": OK, "apiserver-etcd/cp-1": OK}},
		{"keepalived killed on a backup changes nothing", "vip", nil, "keepalived dead on cp-2", full, vip{"cp-1", "cp-1", "cp-1"}, map[string]string{
			"kubectl": OK, "kubelet/gpu-1": OK}},
		{"keepalived failure does not exist without keepalived", "single-ip", nil, "keepalived dead on cp-1", full, vip{}, map[string]string{
			"kubectl": NA}},
		{"vip: the holder cut off, the LAN follows the VIP, the island loses etcd", "vip", nil, "cut cp-1", lostOne, vip{"cp-2", "cp-2", "cp-1"}, map[string]string{
			"kubectl": OK, "kubelet/gpu-1": OK, "kubelet/cp-1": Down, "controller-manager/cp-1": Down, "apiserver-etcd/cp-1": Down, "kubelet/cp-2": OK}},
		{"vip: a backup cut off", "vip", nil, "cut cp-3", lostOne, vip{"cp-1", "cp-1", "cp-1"}, map[string]string{
			"kubectl": OK, "kubelet/cp-3": Down, "apiserver-etcd/cp-3": Down}},
		{"single-ip: the endpoint node cut off", "single-ip", nil, "cut cp-1", lostOne, vip{}, map[string]string{
			"kubectl": Down, "kubelet/gpu-1": Down, "kubelet/cp-1": Down, "kubelet/cp-2": OK}},
		{"vip: the holder's apiserver dead, the track script moves the VIP", "vip", nil, "apiserver dead on cp-1", full, vip{"cp-2", "cp-2", "cp-1"}, map[string]string{
			"kubectl": OK, "kubelet/gpu-1": OK, "kubelet/cp-1": Down, "controller-manager/cp-1": Down, "scheduler/cp-1": Down,
			"apiserver-etcd/cp-1": Gone, "kubelet/cp-2": OK}},
		{"vip: a backup's apiserver dead costs its own node's components", "vip", nil, "apiserver dead on cp-2", full, vip{"cp-1", "cp-1", "cp-1"}, map[string]string{
			"kubectl": OK, "kubelet/cp-2": Down, "scheduler/cp-2": Down, "apiserver-etcd/cp-2": Gone, "kubelet/cp-1": OK}},
		{"single-ip: the endpoint's apiserver dead is the seed's incident with every node up", "single-ip", nil, "apiserver dead on cp-1", full, vip{}, map[string]string{
			"kubectl": Down, "kubelet/gpu-1": Down, "kube-proxy": Down, "kubelet/cp-2": OK, "apiserver-etcd/cp-1": Gone}},
		{"dns: access waits for the record to change", "dns", withDNS, "off cp-1", lostOne, vip{}, map[string]string{
			"kubectl": Manual, "kubelet/gpu-1": Manual, "kubelet/cp-2": OK}},
		{"dns: a dead apiserver needs the record changed too", "dns", withDNS, "apiserver dead on cp-2", full, vip{}, map[string]string{
			"kubectl": Manual, "kubelet/cp-1": OK}},
		{"dns: a worker off changes no record", "dns", withDNS, "off gpu-2", full, vip{}, map[string]string{
			"kubectl": OK}},
		{"cilium pinned to cp-1 by single-ip", "single-ip", withCilium, "off cp-1", lostOne, vip{}, map[string]string{
			"cilium": Down}},
		{"cilium through the VIP", "vip", withCilium, "off cp-1", lostOne, vip{"cp-2", "cp-2", "cp-1"}, map[string]string{
			"cilium": OK}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := outcome(t, predict(t, tc.layout, tc.edit), tc.failure)
			got := data{o.Healthy, o.Members, o.Quorum, o.Data}
			if got != tc.data || o.Writable != (tc.data.state == DataWritable) {
				t.Errorf("etcd %+v writable %v, want %+v", got, o.Writable, tc.data)
			}
			if gv := (vip{o.VIP, strings.Join(o.VIPHolders, " "), o.VIPAfter}); gv != tc.vip {
				t.Errorf("VIP %+v, want %+v", gv, tc.vip)
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

// nopreempt, read from the rendered keepalived.conf, keeps the VIP where
// the failure put it: no handback.
func TestPredictNoPreempt(t *testing.T) {
	inv := load(t, nil)
	c, err := ReadInventory(inv, bundle(t))
	if err != nil {
		t.Fatal(err)
	}
	if c.CheckWeight != -149 || c.NoPreempt {
		t.Fatalf("read weight %d nopreempt %v from keepalived.conf, want -149 false", c.CheckWeight, c.NoPreempt)
	}
	if o := c.Evaluate(NewFailure(FailOff, "cp-1")); !o.Handback() || o.VIPAfter != "cp-1" {
		t.Errorf("with preemption the VIP returns to cp-1: after %q", o.VIPAfter)
	}
	c.NoPreempt = true
	if o := c.Evaluate(NewFailure(FailOff, "cp-1")); o.Handback() || o.VIPAfter != "cp-2" {
		t.Errorf("nopreempt: the VIP stays on cp-2, predicted %q", o.VIPAfter)
	}
	// Without the check's weight a dead apiserver would keep the VIP.
	c.NoPreempt, c.CheckWeight = false, 0
	if o := c.Evaluate(NewFailure(FailAPIServer, "cp-1")); o.VIP != "cp-1" || o.Cells[0].State != Down {
		t.Errorf("no track script weight: VIP %q kubectl %s, want cp-1 down", o.VIP, o.Cells[0].State)
	}
}

func TestFailures(t *testing.T) {
	p := predict(t, "vip", nil)
	var ids []string
	kinds := map[string]int{}
	for _, o := range p.Outcomes {
		ids = append(ids, o.Failure.ID)
		kinds[o.Failure.Kind]++
	}
	// 7 nodes off, 3 pairs, and on each control-plane node a cut, keepalived and the apiserver.
	if len(ids) != 7+3+3+3+3 || kinds[FailCut] != 3 || kinds[FailKeepalived] != 3 || kinds[FailAPIServer] != 3 {
		t.Errorf("failures %v", ids)
	}
	for _, want := range []string{"off cp-1", "off cp-2+cp-3", "cut cp-2", "keepalived dead on cp-1", "apiserver dead on cp-3"} {
		if _, ok := p.Outcome(want); !ok {
			t.Errorf("no failure %q in %v", want, ids)
		}
	}
	if p.VIPHolder != "cp-1" {
		t.Errorf("VIP holder while healthy %q", p.VIPHolder)
	}
}

// Check names everything wrong with a failure at once.
func TestCheckFailure(t *testing.T) {
	c, err := ReadInventory(load(t, nil), bundle(t))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		f    Failure
		want []string // substrings of the error; none: valid
	}{
		{NewFailure(FailCut, "gpu-1"), nil},
		{NewFailure(FailOff, "cp-1", "cp-2"), nil},
		{NewFailure(FailAPIServer, "gpu-1", "cp-9"), []string{"gpu-1 is a worker", `"cp-9" is not a node`}},
		{NewFailure(FailKeepalived, "cp-1", "cp-1"), []string{"cp-1 is named twice"}},
		{NewFailure("reboot", "cp-1"), []string{`"reboot"`, "apiserver"}},
		{Failure{Kind: FailOff}, []string{"no node"}},
	}
	for _, tc := range cases {
		err := c.Check(tc.f)
		if (err == nil) != (tc.want == nil) {
			t.Errorf("%+v: %v", tc.f, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %v lacks %q", tc.f, err, w)
			}
		}
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

// Without homelab's drop-in (a keepalived.service that does not clean up),
// a killed keepalived leaves its VIP on the interface: two holders. Read
// must see the clean-up in the render, not assume it.
func TestKilledKeepalivedWithoutCleanupSplitsTheVIP(t *testing.T) {
	inv := load(t, func(inv *inventory.Inventory) { inv.Cluster.Endpoint.Layout = "vip" })
	c, err := ReadInventory(inv, bundle(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.ControlPlanes {
		if !c.VIPCleanup[n] {
			t.Errorf("%s: the render's keepalived drop-in was not read as removing the VIP", n)
		}
	}
	c.VIPCleanup = map[string]bool{}
	o := c.Evaluate(NewFailure(FailKeepalived, "cp-1"))
	if got := strings.Join(o.VIPHolders, " "); got != "cp-1 cp-2" || !o.SplitBrain() {
		t.Errorf("holders %q (split %v), want cp-1 cp-2 and a split brain", got, o.SplitBrain())
	}
}
