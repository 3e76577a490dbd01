package program

import (
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/keepalived"
	"github.com/homelab-dev/homelab/roles/pki"
)

type registered struct {
	token, name, parent string
	deps                []string
	inputs              resource.PropertyMap
}

type mocks struct {
	mu  sync.Mutex
	all map[string]registered // by name
}

func (m *mocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := registered{token: args.TypeToken, name: args.Name, inputs: args.Inputs}
	if rpc := args.RegisterRPC; rpc != nil {
		r.deps = rpc.GetDependencies()
		r.parent = rpc.GetParent()
	}
	m.all[args.TypeToken+"/"+args.Name] = r
	return args.Name + "-id", args.Inputs, nil
}

func (m *mocks) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return resource.PropertyMap{}, nil
}

func runMocked(t *testing.T, layout string) *mocks {
	t.Helper()
	return runMockedWith(t, func(inv *inventory.Inventory) { inv.Cluster.Endpoint.Layout = layout })
}

// runMockedWith runs the program on the shipped homelab changed by edit,
// and its Config changed by configure.
func runMockedWith(t *testing.T, edit func(inv *inventory.Inventory), configure ...func(*Config)) *mocks {
	t.Helper()
	inv, _, err := inventory.Load("../../inventory/homelab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	edit(inv)
	if _, err := inventory.Validate(inv); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../../roles/testdata/bundle.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := pki.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	m := &mocks{all: map[string]registered{}}
	cfg := Config{Inventory: inv, Bundle: b, PrivateKey: "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n", KnownHosts: "/k"}
	for _, c := range configure {
		c(&cfg)
	}
	if err := pulumi.RunErr(Run(cfg), pulumi.WithMocks("homelab", "test", m)); err != nil {
		t.Fatal(err)
	}
	return m
}

func (m *mocks) get(t *testing.T, token, name string) registered {
	t.Helper()
	r, ok := m.all[token+"/"+name]
	if !ok {
		t.Fatalf("%s %s not registered", token, name)
	}
	return r
}

func dependsOn(r registered, token, name string) bool {
	return slices.ContainsFunc(r.deps, func(urn string) bool { return strings.HasSuffix(urn, token+"::"+name) })
}

func TestBootstrapOrder(t *testing.T) {
	m := runMocked(t, inventory.LayoutVIP)
	const (
		svc  = "homelab:index:Service"
		ini  = "homelab:index:KubeadmInit"
		join = "homelab:index:KubeadmJoin"
		file = "homelab:index:File"
	)
	init := m.get(t, ini, "homelab")
	if init.inputs["connection"].ObjectValue()["node"].StringValue() != "cp-1" {
		t.Errorf("a new cluster bootstraps on %v, want the first control-plane node", init.inputs["connection"])
	}
	for _, cp := range []string{"cp-1", "cp-2", "cp-3"} {
		if !dependsOn(init, svc, cp+":keepalived") {
			t.Errorf("init does not wait for %s's keepalived (the VIP must answer first)", cp)
		}
		if !dependsOn(m.get(t, svc, cp+":keepalived"), file, cp+":"+keepalived.DropInPath) {
			t.Errorf("%s's keepalived starts before its systemd drop-in is in place", cp)
		}
	}
	if !dependsOn(init, file, "cp-1:/etc/kubernetes/pki/ca.key") || !dependsOn(init, file, "cp-1:/etc/kubernetes/kubeadm/init.yaml") {
		t.Error("init does not wait for its CA and config files")
	}
	if !dependsOn(m.get(t, join, "cp-1"), ini, "homelab") {
		t.Error("the bootstrap node's membership does not follow the bootstrap")
	}
	if !dependsOn(m.get(t, join, "cp-2"), join, "cp-1") {
		t.Error("cp-2 joins before cp-1 is a member")
	}
	if !dependsOn(m.get(t, join, "cp-3"), join, "cp-2") {
		t.Error("cp-3 does not join after cp-2 (control-plane joins must be one at a time)")
	}
	for _, w := range []string{"gpu-1", "gpu-2", "gpu-3", "gpu-4"} {
		j := m.get(t, join, w)
		if !dependsOn(j, join, "cp-1") || dependsOn(j, join, "cp-2") || dependsOn(j, join, "cp-3") {
			t.Errorf("%s does not join as soon as the bootstrap node serves the API, alongside the control-plane joins: %v", w, j.deps)
		}
		for _, other := range []string{"gpu-1", "gpu-2", "gpu-3", "gpu-4"} {
			if other != w && dependsOn(j, join, other) {
				t.Errorf("%s waits for %s: workers must join in parallel", w, other)
			}
		}
		if !strings.HasSuffix(j.parent, "homelab:cluster:Worker::"+w) {
			t.Errorf("%s's join is not a child of its Worker component: %s", w, j.parent)
		}
	}
	if !dependsOn(m.get(t, "homelab:index:NodeMeta", "gpu-1"), join, "gpu-1") {
		t.Error("labels applied before the node joined")
	}
	etcd := m.get(t, "homelab:index:EtcdMembers", "etcd")
	if !dependsOn(etcd, join, "cp-3") {
		t.Error("etcd membership checked before every control-plane node joined")
	}
	if _, ok := m.all["homelab:index:Manifest/runtimeclass-nvidia"]; !ok {
		t.Error("no RuntimeClass for GPU workers")
	}
}

func TestSecretsAreSecretInputs(t *testing.T) {
	m := runMocked(t, inventory.LayoutVIP)
	for _, name := range []string{"cp-1:/etc/kubernetes/pki/ca.key", "cp-1:/etc/keepalived/keepalived.conf"} {
		r := m.get(t, "homelab:index:File", name)
		if !r.inputs["content"].IsSecret() {
			t.Errorf("%s content is not a secret input", name)
		}
	}
	if r := m.get(t, "homelab:index:File", "cp-1:/etc/kubernetes/pki/ca.crt"); r.inputs["content"].IsSecret() {
		t.Error("a public certificate is needlessly secret")
	}
	conn := m.get(t, "homelab:index:Host", "gpu-1").inputs["connection"].ObjectValue()
	if !conn["privateKey"].IsSecret() {
		t.Error("the SSH private key is not a secret input")
	}
	join := m.get(t, "homelab:index:KubeadmJoin", "gpu-1")
	if !join.inputs["bootstrapToken"].IsSecret() || !join.inputs["config"].IsSecret() {
		t.Error("the join token, or the join config holding it, is not a secret input")
	}
	// The join config is the join's to write and remove: no File keeps
	// the token on a node.
	for k := range m.all {
		if strings.HasSuffix(k, ":/etc/kubernetes/kubeadm/join.yaml") {
			t.Errorf("%s: the join config is a File", k)
		}
	}
}

// Listing the nodes in another order changes no resource's identity or
// inputs but the means (which node the cluster is reached through, which
// one a new cluster would bootstrap on), which no Diff counts.
func TestReorderedNodesDeclareTheSameResources(t *testing.T) {
	means := map[string]bool{"via": true, "peers": true, "nodes": true}
	strip := func(r registered) resource.PropertyValue {
		in := r.inputs.Copy()
		for k := range in {
			if means[string(k)] {
				delete(in, k)
			}
		}
		if r.token == "homelab:index:KubeadmInit" {
			delete(in, "connection")
		}
		return resource.NewObjectProperty(in)
	}
	before := runMocked(t, inventory.LayoutVIP)
	after := runMockedWith(t, func(inv *inventory.Inventory) {
		inv.Nodes[0], inv.Nodes[2] = inv.Nodes[2], inv.Nodes[0]
		inv.Nodes[3], inv.Nodes[6] = inv.Nodes[6], inv.Nodes[3]
	})
	if len(before.all) != len(after.all) {
		t.Errorf("%d resources before, %d after reordering", len(before.all), len(after.all))
	}
	for key, r := range before.all {
		a, ok := after.all[key]
		if !ok {
			t.Errorf("%s is gone after reordering the nodes", key)
			continue
		}
		if !strip(r).DeepEquals(strip(a)) {
			t.Errorf("%s: inputs differ after reordering:\n  %v\n  %v", key, strip(r), strip(a))
		}
	}
}

// single-ip: the endpoint node bootstraps the cluster, wherever it is
// listed; it has no join config, since it would join through itself.
// Each control-plane node pulls kubeadm's images before its init or join,
// after only its init config; the bootstrap node alone first, the others
// while it bootstraps; workers pull nothing ahead.
func TestImagesPulledBeforeTheChain(t *testing.T) {
	for _, tc := range []struct {
		layout, boot string
		others       []string
	}{
		{inventory.LayoutVIP, "cp-1", []string{"cp-2", "cp-3"}},
		{inventory.LayoutSingleIP, "cp-2", []string{"cp-1", "cp-3"}},
	} {
		m := runMockedWith(t, func(inv *inventory.Inventory) {
			inv.Cluster.Endpoint.Layout = tc.layout
			if tc.layout == inventory.LayoutSingleIP {
				inv.Cluster.Endpoint.Node = tc.boot
			}
		})
		const images, join, file = "homelab:index:KubeadmImages", "homelab:index:KubeadmJoin", "homelab:index:File"
		if !dependsOn(m.get(t, "homelab:index:KubeadmInit", "homelab"), images, tc.boot) {
			t.Errorf("%s: the init does not wait for %s's images", tc.layout, tc.boot)
		}
		for _, n := range append([]string{tc.boot}, tc.others...) {
			im := m.get(t, images, n)
			if !dependsOn(im, file, n+":/etc/kubernetes/kubeadm/init.yaml") || dependsOn(im, file, n+":/etc/kubernetes/pki/ca.key") {
				t.Errorf("%s: %s's images wait for other than its init config: %v", tc.layout, n, im.deps)
			}
			if dependsOn(im, "homelab:index:KubeadmInit", "homelab") {
				t.Errorf("%s: %s's images wait for the init", tc.layout, n)
			}
			if !dependsOn(m.get(t, join, n), images, n) {
				t.Errorf("%s: %s joins before its images are pulled", tc.layout, n)
			}
			if im.inputs["kubernetesVersion"].StringValue() == "" {
				t.Errorf("%s: %s's images name no version", tc.layout, n)
			}
		}
		for _, n := range tc.others {
			if !dependsOn(m.get(t, images, n), images, tc.boot) {
				t.Errorf("%s: %s pulls beside the bootstrap node's pull", tc.layout, n)
			}
		}
		for key := range m.all {
			if strings.HasPrefix(key, images+"/gpu-") {
				t.Errorf("a worker pulls ahead: %s", key)
			}
		}
	}
}

func TestSingleIPBootstrapsOnTheEndpointNode(t *testing.T) {
	m := runMockedWith(t, func(inv *inventory.Inventory) {
		inv.Cluster.Endpoint.Layout, inv.Cluster.Endpoint.Node = inventory.LayoutSingleIP, "cp-2"
	})
	init := m.get(t, "homelab:index:KubeadmInit", "homelab")
	if got := init.inputs["connection"].ObjectValue()["node"].StringValue(); got != "cp-2" {
		t.Errorf("bootstraps on %s, want the endpoint node cp-2", got)
	}
	if !dependsOn(m.get(t, "homelab:index:KubeadmJoin", "cp-1"), "homelab:index:KubeadmJoin", "cp-2") {
		t.Error("cp-1 joins before the endpoint node is a member")
	}
	if _, ok := m.get(t, "homelab:index:KubeadmJoin", "cp-2").inputs["config"]; ok {
		t.Error("the endpoint node has a join config")
	}
	// The pod network goes through the node the cluster was bootstrapped
	// on too: its admin.conf and init config are there.
	if got := m.get(t, "homelab:index:Dataplane", "dataplane").inputs["via"].ObjectValue()["node"].StringValue(); got != "cp-2" {
		t.Errorf("the Dataplane goes through %s, want the endpoint node cp-2", got)
	}
}

func TestSingleIPLayoutHasNoKeepalived(t *testing.T) {
	m := runMocked(t, inventory.LayoutSingleIP)
	for k := range m.all {
		if strings.Contains(k, "keepalived") {
			t.Errorf("single-ip layout declares %s", k)
		}
	}
	if len(m.get(t, "homelab:index:KubeadmInit", "homelab").deps) == 0 {
		t.Error("init has no dependencies")
	}
}

// Every control-plane node renews its certificates within the declared
// window, checking the API through the endpoint, and one node after the
// other: each ControlPlaneAddress waits for the previous one.
func TestCertificateRenewalInputs(t *testing.T) {
	m := runMockedWith(t, func(inv *inventory.Inventory) { inv.Cluster.Certificates.RenewBefore = "1000h" })
	const addr = "homelab:index:ControlPlaneAddress"
	prev := ""
	for _, cp := range []string{"cp-1", "cp-2", "cp-3"} {
		a := m.get(t, addr, cp)
		if got := a.inputs["renewBefore"].StringValue(); got != "1000h" {
			t.Errorf("%s renews %s before expiry, declared 1000h", cp, got)
		}
		if got := a.inputs["endpoint"].StringValue(); got != "10.0.0.100:6443" {
			t.Errorf("%s checks the API through %s", cp, got)
		}
		if prev != "" && !dependsOn(a, addr, prev) {
			t.Errorf("%s does not wait for %s: renewals must go one node at a time", cp, prev)
		}
		prev = cp
	}
}

// reaches reports whether r depends on the resource named by urnSuffix,
// directly or through its dependencies.
func (m *mocks) reaches(r registered, urnSuffix string) bool {
	byURN := map[string]registered{}
	for _, x := range m.all {
		byURN[x.token+"::"+x.name] = x
	}
	seen := map[string]bool{}
	var walk func(registered) bool
	walk = func(r registered) bool {
		for _, d := range r.deps {
			if strings.HasSuffix(d, urnSuffix) {
				return true
			}
			if seen[d] {
				continue
			}
			seen[d] = true
			for k, x := range byURN {
				if strings.HasSuffix(d, k) && walk(x) {
					return true
				}
			}
		}
		return false
	}
	return walk(r)
}

// An expired control plane is revived over SSH before anything needs the
// API or etcd: the bootstrap waits for the revival, and so, through it,
// does every resource that reads or writes through the API or etcd. The
// revival has every control-plane node's init config, CAs and keepalived
// in place first.
func TestRevivalComesBeforeTheAPI(t *testing.T) {
	m := runMockedWith(t, func(inv *inventory.Inventory) { inv.Cluster.Certificates.RenewBefore = "1000h" })
	const revival = "homelab:index:ControlPlaneRevival"
	rv := m.get(t, revival, "control-plane")
	var nodes []string
	for _, n := range rv.inputs["nodes"].ArrayValue() {
		nodes = append(nodes, n.ObjectValue()["node"].StringValue()+"="+n.ObjectValue()["host"].StringValue())
	}
	if !slices.Equal(nodes, []string{"cp-1=10.0.0.120", "cp-2=10.0.0.121", "cp-3=10.0.0.122"}) {
		t.Errorf("revives %v", nodes)
	}
	if rv.inputs["renewBefore"].StringValue() != "1000h" || rv.inputs["endpoint"].StringValue() != "10.0.0.100:6443" {
		t.Errorf("revival inputs %v", rv.inputs)
	}
	for _, cp := range []string{"cp-1", "cp-2", "cp-3"} {
		for _, dep := range []string{"homelab:index:Service::" + cp + ":keepalived", "homelab:index:File::" + cp + ":/etc/kubernetes/kubeadm/init.yaml", "homelab:index:File::" + cp + ":/etc/kubernetes/pki/etcd/ca.key"} {
			if !slices.ContainsFunc(rv.deps, func(d string) bool { return strings.HasSuffix(d, dep) }) {
				t.Errorf("the revival does not wait for %s", dep)
			}
		}
	}
	if !dependsOn(m.get(t, "homelab:index:KubeadmInit", "homelab"), revival, "control-plane") {
		t.Error("the bootstrap does not wait for the revival")
	}
	api := map[string]bool{"KubeadmJoin": true, "NodeMeta": true, "Manifest": true, "EtcdMembers": true, "ControlPlaneAddress": true, "Dataplane": true}
	checked := 0
	for _, r := range m.all {
		kind := strings.TrimPrefix(r.token, "homelab:index:")
		if !api[kind] {
			continue
		}
		checked++
		if !m.reaches(r, revival+"::control-plane") {
			t.Errorf("%s %s can run before the revival", kind, r.name)
		}
	}
	if checked < 20 {
		t.Errorf("only %d resources checked", checked)
	}
}

// waitsFor reports whether r waits for a resource of token named name,
// through any chain of dependencies ("" matches every name).
func waitsFor(m *mocks, r registered, token, name string) bool {
	seen := map[string]bool{}
	todo := slices.Clone(r.deps)
	for len(todo) > 0 {
		urn := todo[0]
		todo = todo[1:]
		if seen[urn] {
			continue
		}
		seen[urn] = true
		for _, d := range m.all {
			if !strings.HasSuffix(urn, "::"+d.name) || !strings.Contains(urn, d.token+"::") {
				continue
			}
			if d.token == token && (name == "" || d.name == name) {
				return true
			}
			todo = append(todo, d.deps...)
		}
	}
	return false
}

// keepalived's steps follow their own node's Host, not the cluster-wide
// upgrade, which waits for every node's Host: the endpoint answers sooner,
// and the provider's endpoint lock, not the graph, keeps keepalived's
// restarts apart from the upgrade's VIP hand-over.
func TestKeepalivedWaitsForItsOwnHostAlone(t *testing.T) {
	m := runMocked(t, inventory.LayoutVIP)
	for _, cp := range []string{"cp-1", "cp-2", "cp-3"} {
		svc := m.get(t, "homelab:index:Service", cp+":keepalived")
		if waitsFor(m, svc, "homelab:index:KubernetesUpgrade", "") {
			t.Errorf("%s's keepalived waits for the upgrade", cp)
		}
		if !waitsFor(m, svc, "homelab:index:Host", cp) || waitsFor(m, svc, "homelab:index:Host", "gpu-1") {
			t.Errorf("%s's keepalived should wait for its own Host and no worker's", cp)
		}
	}
	// Everything else of the node still follows the upgrade.
	if !waitsFor(m, m.get(t, "homelab:index:File", "cp-1:/etc/kubernetes/kubeadm/init.yaml"), "homelab:index:KubernetesUpgrade", "") {
		t.Error("cp-1's init config does not wait for the upgrade")
	}
}
