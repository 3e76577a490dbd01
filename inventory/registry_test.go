package inventory

import (
	"maps"
	"testing"
)

func TestRegistryMirrors(t *testing.T) {
	var c Cluster
	if m := c.RegistryMirrors(); m != nil {
		t.Errorf("no mirror declared: %v", m)
	}
	c.Registry = Registry{Mirror: "http://10.0.0.2:5000", Mirrors: map[string]string{"ghcr.io": "https://ghcr.mirror.lan", "quay.io": "http://10.0.0.3:5000"}}
	want := map[string]string{
		"docker.io":       "http://10.0.0.2:5000",
		"nvcr.io":         "http://10.0.0.2:5000",
		"registry.k8s.io": "http://10.0.0.2:5000",
		"quay.io":         "http://10.0.0.3:5000",
		"ghcr.io":         "https://ghcr.mirror.lan",
	}
	if got := c.RegistryMirrors(); !maps.Equal(got, want) {
		t.Errorf("mirrors %v, want %v", got, want)
	}
}
