package provider

import (
	"reflect"
	"strings"
	"testing"
)

// The engine deletes an input named "version" (and "__"-prefixed ones)
// before Diff, and decoding the inputs then fails on every preview: no
// resource may use those names.
func TestNoReservedInputNames(t *testing.T) {
	for _, args := range []any{HostArgs{}, FileArgs{}, ServiceArgs{}, KubeadmInitArgs{}, KubeadmJoinArgs{}, NodeMetaArgs{},
		ManifestArgs{}, EtcdMembersArgs{}, DataplaneArgs{}, ControlPlaneAddressArgs{}, PackageArgs{}} {
		checkNames(t, reflect.TypeOf(args))
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
