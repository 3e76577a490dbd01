package provider

import (
	"context"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/mapper"
)

// The engine deletes an input named "version" (and "__"-prefixed ones)
// before Diff, and decoding the inputs then fails on every preview: no
// resource may use those names.
func TestNoReservedInputNames(t *testing.T) {
	checked := map[string]bool{}
	for _, args := range []any{HostArgs{}, FileArgs{}, ServiceArgs{}, KubeadmInitArgs{}, KubeadmJoinArgs{}, NodeMetaArgs{},
		ManifestArgs{}, EtcdMembersArgs{}, DataplaneArgs{}, ControlPlaneAddressArgs{}, PackageArgs{}, ControlPlaneRevivalArgs{},
		KubernetesUpgradeArgs{}, KubeletServingArgs{}, KubeadmImagesArgs{}, NetplanArgs{}} {
		checkNames(t, reflect.TypeOf(args))
		checked[strings.TrimSuffix(reflect.TypeOf(args).Name(), "Args")] = true
	}
	for _, r := range registered(t) {
		if !checked[r] {
			t.Errorf("%sArgs is not checked here: add it to the list", r)
		}
	}
}

// registered lists the resources provider.go registers (infer.Resource).
func registered(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("provider.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`infer\.Resource\(&(\w+)\{\}\)`).FindAllStringSubmatch(string(src), -1) {
		out = append(out, m[1])
	}
	if len(out) == 0 {
		t.Fatal("no infer.Resource in provider.go")
	}
	return out
}

// Every registered resource has its shape asserted in provider.go (the
// resource interface: Create, Read, Diff, Update, Annotate): a Read or
// Diff whose signature drifted would compile and fall back to infer's
// default without it.
func TestEveryResourceAssertsItsMethods(t *testing.T) {
	src, err := os.ReadFile("provider.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range registered(t) {
		if !regexp.MustCompile(`_ (resource|removable)\[\w+, \w+\]\s*=\s*\(\*` + r + `\)\(nil\)`).Match(src) {
			t.Errorf("provider.go does not assert %s's shape", r)
		}
	}
}

// A resource lives in the file named after it (KubeadmJoin in
// kubeadmjoin.go), so a newcomer finds it from the name alone.
func TestEveryResourceHasItsFile(t *testing.T) {
	for _, r := range registered(t) {
		file := strings.ToLower(r) + ".go"
		src, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("%s: %v", r, err)
			continue
		}
		if !regexp.MustCompile(`(?m)^type ` + r + ` struct`).Match(src) {
			t.Errorf("%s does not declare type %s", file, r)
		}
	}
}

func checkNames(t *testing.T, ty reflect.Type) {
	for i := range ty.NumField() {
		f := ty.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("pulumi"), ",")
		if name == "version" || strings.HasPrefix(name, "__") {
			t.Errorf("%s.%s: input named %q is stripped by the engine", ty.Name(), f.Name, name)
		}
		if f.Type.Kind() == reflect.Struct {
			checkNames(t, f.Type)
		}
	}
}

// Every resource, input and output, and object type in the schema says
// what it is: `pulumi package get-schema` and `pulumi preview --diff` are
// how users read the provider.
func TestSchemaDocumentsEverything(t *testing.T) {
	prov, err := New()
	if err != nil {
		t.Fatal(err)
	}
	spec, err := p.GetSchema(context.Background(), Name, Version, prov)
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Resources) != 16 {
		t.Errorf("%d resources in the schema, want 16", len(spec.Resources))
	}
	check := func(kind, token string, o schema.ObjectTypeSpec, inputs map[string]schema.PropertySpec) {
		if o.Description == "" {
			t.Errorf("%s %s has no description", kind, token)
		}
		for _, props := range []map[string]schema.PropertySpec{o.Properties, inputs} {
			for name, pr := range props {
				if pr.Description == "" {
					t.Errorf("%s %s: property %s has no description", kind, token, name)
				}
			}
		}
	}
	for token, r := range spec.Resources {
		if len(r.InputProperties) == 0 {
			t.Errorf("resource %s has no inputs in the schema", token)
		}
		check("resource", token, r.ObjectTypeSpec, r.InputProperties)
	}
	for token, ty := range spec.Types {
		check("type", token, ty.ObjectTypeSpec, nil)
	}
}

// State written by the previous release must still decode into today's
// types (infer refuses unknown and missing keys): an upgraded homelab
// reads its users' stacks as they are. These are the shapes it wrote.
func TestEarlierStateDecodes(t *testing.T) {
	conn := map[string]any{"node": "cp-1", "host": "10.0.0.120", "port": 22.0, "user": "root", "privateKey": "k", "knownHosts": "/k"}
	for _, c := range []struct {
		into  any
		state map[string]any
	}{
		{&KubeadmInitState{}, map[string]any{"connection": conn, "configPath": "/etc/kubernetes/kubeadm/init.yaml", "configSha": "x",
			"ignorePreflight": []any{}, "peers": []any{conn}, "joinConfigPath": "/etc/kubernetes/kubeadm/join.yaml", "bootstrapToken": "abcdef.0123456789abcdef",
			"initialized": true, "adminKubeconfig": "apiVersion: v1"}},
		{&KubeadmJoinState{}, map[string]any{"connection": conn, "configPath": "/etc/kubernetes/kubeadm/join.yaml", "configSha": "x", "controlPlane": true,
			"ignorePreflight": []any{}, "via": conn, "bootstrapToken": "abcdef.0123456789abcdef", "peers": []any{conn}, "joined": true}},
		{&ControlPlaneAddressState{}, map[string]any{"connection": conn, "address": "10.0.0.120", "apiServerSANs": []any{"a"}, "etcdSANs": []any{"b"},
			"config": "kind: InitConfiguration", "port": 6443.0, "componentArgs": map[string]any{}, "liveAdvertise": "10.0.0.120", "liveEtcdPeer": "10.0.0.120", "liveNodeIP": "10.0.0.120"}},
		// Before certificates were renewed: no renewBefore, endpoint or liveExpiry.
		{&ControlPlaneAddressState{}, map[string]any{"connection": conn, "address": "10.0.0.120", "apiServerSANs": []any{"a"}, "etcdSANs": []any{"b"},
			"configPath": "/etc/kubernetes/kubeadm/init.yaml", "port": 6443.0, "componentArgs": map[string]any{"kube-scheduler": []any{"bind-address=127.0.0.1"}},
			"liveAdvertise": "10.0.0.120", "liveEtcdPeer": "10.0.0.120", "liveNodeIP": "10.0.0.120", "liveKubeconfig": map[string]any{"kubelet.conf": "10.0.0.120"},
			"liveSANs": map[string]any{"apiserver.crt": "10.0.0.120,cp-1"}, "liveArgs": map[string]any{"kube-scheduler/bind-address": "127.0.0.1"}}},
		{&DataplaneState{}, map[string]any{"via": conn, "nodes": []any{conn}, "replacement": "none", "initConfigPath": "/etc/kubernetes/kubeadm/init.yaml",
			"values": "{}", "chartRepo": "https://helm.cilium.io", "chartName": "cilium", "chartVersion": "1.18.4", "release": "cilium", "namespace": "kube-system",
			"wait": "", "kubeProxy": true, "releasePresent": false}},
		{&HostState{}, map[string]any{"connection": conn, "address": "10.0.0.120", "mac": "", "requires": []any{"kubeadm"}, "hostname": "cp-1", "os": "Debian", "kernel": "6",
			"hostKey": "SHA256:x", "convergedHostKey": "SHA256:x"}},
	} {
		if err := mapper.New(&mapper.Opts{}).Decode(c.state, c.into); err != nil {
			t.Errorf("%T: state from the previous release does not decode: %v", c.into, err)
		}
	}
}
