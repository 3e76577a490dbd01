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

// runMockedWith runs the program on the shipped homelab changed by edit.
func runMockedWith(t *testing.T, edit func(inv *inventory.Inventory)) *mocks {
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
	init := m.get(t, ini, "cp-1")
	for _, cp := range []string{"cp-1", "cp-2", "cp-3"} {
		if !dependsOn(init, svc, cp+":keepalived") {
			t.Errorf("init does not wait for %s's keepalived (the VIP must answer first)", cp)
		}
	}
	if !dependsOn(init, file, "cp-1:/etc/kubernetes/pki/ca.key") || !dependsOn(init, file, "cp-1:/etc/kubernetes/kubeadm/init.yaml") {
		t.Error("init does not wait for its CA and config files")
	}
	if !dependsOn(m.get(t, join, "cp-2"), ini, "cp-1") {
		t.Error("cp-2 joins before init")
	}
	if !dependsOn(m.get(t, join, "cp-3"), join, "cp-2") {
		t.Error("cp-3 does not join after cp-2 (control-plane joins must be one at a time)")
	}
	for _, w := range []string{"gpu-1", "gpu-2", "gpu-3", "gpu-4"} {
		j := m.get(t, join, w)
		if !dependsOn(j, join, "cp-3") {
			t.Errorf("%s joins before the last control-plane node", w)
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
	for _, name := range []string{"cp-1:/etc/kubernetes/pki/ca.key", "cp-2:/etc/kubernetes/kubeadm/join.yaml", "cp-1:/etc/keepalived/keepalived.conf"} {
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
	if !m.get(t, "homelab:index:KubeadmJoin", "gpu-1").inputs["bootstrapToken"].IsSecret() {
		t.Error("the bootstrap token is not a secret input")
	}
}

func TestSingleIPLayoutHasNoKeepalived(t *testing.T) {
	m := runMocked(t, inventory.LayoutSingleIP)
	for k := range m.all {
		if strings.Contains(k, "keepalived") {
			t.Errorf("single-ip layout declares %s", k)
		}
	}
	if len(m.get(t, "homelab:index:KubeadmInit", "cp-1").deps) == 0 {
		t.Error("init has no dependencies")
	}
}
