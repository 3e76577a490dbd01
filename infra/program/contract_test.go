package program

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"

	"github.com/homelab-dev/homelab/infra/provider"
	"github.com/homelab-dev/homelab/inventory"
)

// argsOf is the provider's input type of each resource the program
// registers. The program passes inputs as pulumi.Map with string keys; the
// provider decodes them into these structs by their pulumi tags. Nothing
// but this test ties the two together.
var argsOf = map[string]any{
	pkg + "Host":                provider.HostArgs{},
	pkg + "File":                provider.FileArgs{},
	pkg + "Netplan":             provider.NetplanArgs{},
	pkg + "Service":             provider.ServiceArgs{},
	pkg + "Package":             provider.PackageArgs{},
	pkg + "KubeadmInit":         provider.KubeadmInitArgs{},
	pkg + "KubeadmJoin":         provider.KubeadmJoinArgs{},
	pkg + "NodeMeta":            provider.NodeMetaArgs{},
	pkg + "Manifest":            provider.ManifestArgs{},
	pkg + "EtcdMembers":         provider.EtcdMembersArgs{},
	pkg + "Dataplane":           provider.DataplaneArgs{},
	pkg + "ControlPlaneAddress": provider.ControlPlaneAddressArgs{},
	pkg + "ControlPlaneRevival": provider.ControlPlaneRevivalArgs{},
	pkg + "KubernetesUpgrade":   provider.KubernetesUpgradeArgs{},
	pkg + "KubeletServing":      provider.KubeletServingArgs{},
	pkg + "KubeadmImages":       provider.KubeadmImagesArgs{},
}

// Every input the program registers is one the provider decodes, with the
// kind it decodes, and every input the provider requires is given: a field
// renamed on one side fails here, not on a user's machines.
func TestInputsMatchTheProvider(t *testing.T) {
	prov, err := provider.New()
	if err != nil {
		t.Fatal(err)
	}
	spec, err := p.GetSchema(context.Background(), provider.Name, provider.Version, prov)
	if err != nil {
		t.Fatal(err)
	}
	for token := range spec.Resources {
		if _, ok := argsOf[token]; !ok {
			t.Errorf("the provider serves %s, which this test does not check: add it to argsOf", token)
		}
	}
	// Between them these shapes register every resource and every
	// optional input the program can set.
	runs := map[string]func(*inventory.Inventory){
		"vip": func(inv *inventory.Inventory) {
			inv.Cluster.GPU.DevicePlugin.Enabled = true
			inv.Cluster.Cilium.Chart = "/charts/cilium.tgz"
		},
		"single-ip": func(inv *inventory.Inventory) { inv.Cluster.Endpoint.Layout = inventory.LayoutSingleIP },
		"dns": func(inv *inventory.Inventory) {
			inv.Cluster.Endpoint.Layout, inv.Cluster.Endpoint.DNSName = inventory.LayoutDNS, "k8s.home.arpa"
		},
	}
	seen := map[string]bool{}
	for name, edit := range runs {
		m := runMockedWith(t, edit)
		for _, r := range m.all {
			if !strings.HasPrefix(r.token, pkg) {
				continue
			}
			args, ok := argsOf[r.token]
			if !ok {
				t.Errorf("%s: the program registers %s, which the provider does not serve", name, r.token)
				continue
			}
			seen[r.token] = true
			for _, problem := range matchInputs(reflect.TypeOf(args), resource.NewObjectProperty(r.inputs), "") {
				t.Errorf("%s: %s %s: %s", name, r.token, r.name, problem)
			}
		}
	}
	for token := range argsOf {
		if !seen[token] {
			t.Errorf("no run of the program registered %s: its inputs went unchecked", token)
		}
	}
}

// The check itself must catch a renamed, a missing and a mistyped input.
func TestMatchInputsFindsMismatches(t *testing.T) {
	conn := resource.NewObjectProperty(resource.PropertyMap{
		"node": resource.NewStringProperty("cp-1"), "host": resource.NewStringProperty("10.0.0.1"),
		"privateKey": resource.MakeSecret(resource.NewStringProperty("k")), "knownHosts": resource.NewStringProperty("/k"),
	})
	good := resource.PropertyMap{
		"connection": conn, "name": resource.NewStringProperty("keepalived"),
	}
	if got := matchInputs(reflect.TypeOf(provider.ServiceArgs{}), resource.NewObjectProperty(good), ""); len(got) != 0 {
		t.Fatalf("a matching input reported: %v", got)
	}
	for _, c := range []struct {
		name  string
		edit  func(resource.PropertyMap)
		field string
	}{
		{"renamed", func(m resource.PropertyMap) { m["unit"] = m["name"]; delete(m, "name") }, "unit"},
		{"required missing", func(m resource.PropertyMap) { delete(m, "name") }, "name"},
		{"wrong kind", func(m resource.PropertyMap) { m["trigger"] = resource.NewNumberProperty(1) }, "trigger"},
		{"nested", func(m resource.PropertyMap) {
			c := m["connection"].ObjectValue().Copy()
			c["address"] = c["host"]
			delete(c, "host")
			m["connection"] = resource.NewObjectProperty(c)
		}, "connection.host"},
	} {
		m := good.Copy()
		c.edit(m)
		got := matchInputs(reflect.TypeOf(provider.ServiceArgs{}), resource.NewObjectProperty(m), "")
		if len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), c.field) {
			t.Errorf("%s: got %v, want a problem naming %s", c.name, got, c.field)
		}
	}
}

// matchInputs lists where v does not decode into t by t's pulumi tags.
func matchInputs(t reflect.Type, v resource.PropertyValue, path string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for v.IsSecret() {
		v = v.SecretValue().Element
	}
	if v.IsComputed() || v.IsOutput() || v.IsNull() {
		return nil // unknown at preview: its kind shows once known
	}
	at := func(format string, args ...any) []string {
		where := path
		if where == "" {
			where = "(inputs)"
		}
		return []string{where + ": " + fmt.Sprintf(format, args...)}
	}
	switch t.Kind() {
	case reflect.Struct:
		if !v.IsObject() {
			return at("an object is expected, the program gives %s", v.TypeString())
		}
		fields := map[string]reflect.StructField{}
		for _, f := range reflect.VisibleFields(t) {
			if name, _, _ := strings.Cut(f.Tag.Get("pulumi"), ","); name != "" && !f.Anonymous {
				fields[name] = f
			}
		}
		obj := v.ObjectValue()
		var out []string
		for _, k := range obj.StableKeys() {
			f, ok := fields[string(k)]
			if !ok {
				out = append(out, at("the program gives %q, which the provider's %s does not have", join(path, string(k)), t.Name())...)
				continue
			}
			out = append(out, matchInputs(f.Type, obj[k], join(path, string(k)))...)
		}
		var names []string
		for name := range fields {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if strings.Contains(fields[name].Tag.Get("pulumi"), ",optional") {
				continue
			}
			if _, ok := obj[resource.PropertyKey(name)]; !ok {
				out = append(out, at("the provider's %s requires %q, which the program does not give", t.Name(), join(path, name))...)
			}
		}
		return out
	case reflect.Slice:
		if !v.IsArray() {
			return at("a list is expected, the program gives %s", v.TypeString())
		}
		var out []string
		for i, e := range v.ArrayValue() {
			out = append(out, matchInputs(t.Elem(), e, fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	case reflect.Map:
		if !v.IsObject() {
			return at("a map is expected, the program gives %s", v.TypeString())
		}
		var out []string
		for k, e := range v.ObjectValue() {
			out = append(out, matchInputs(t.Elem(), e, path+"["+string(k)+"]")...)
		}
		return out
	case reflect.String:
		if !v.IsString() {
			return at("a string is expected, the program gives %s", v.TypeString())
		}
	case reflect.Int, reflect.Int64, reflect.Float64:
		if !v.IsNumber() {
			return at("a number is expected, the program gives %s", v.TypeString())
		}
	case reflect.Bool:
		if !v.IsBool() {
			return at("true or false is expected, the program gives %s", v.TypeString())
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
