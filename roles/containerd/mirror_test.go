package containerd

import (
	"testing"

	"github.com/BurntSushi/toml"
)

func TestHostsTOML(t *testing.T) {
	data, err := HostsTOML(Mirror{Registry: "registry.k8s.io", URL: "http://10.77.0.1:5000"})
	if err != nil {
		t.Fatal(err)
	}
	var got hosts
	if _, err := toml.Decode(string(data), &got); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if got.Server != "http://10.77.0.1:5000" {
		t.Errorf("server = %q: the upstream would be tried after the mirror", got.Server)
	}
	if h, ok := got.Host["http://10.77.0.1:5000"]; !ok || len(h.Capabilities) != 2 {
		t.Errorf("host sections: %+v", got.Host)
	}
	if HostsPath("quay.io") != "/etc/containerd/certs.d/quay.io/hosts.toml" {
		t.Errorf("HostsPath: %s", HostsPath("quay.io"))
	}
}

func TestHostsTOMLRefuses(t *testing.T) {
	for _, m := range []Mirror{
		{Registry: "registry.k8s.io", URL: "10.77.0.1:5000"},
		{Registry: "registry.k8s.io", URL: "ftp://10.77.0.1"},
		{Registry: "registry.k8s.io", URL: "http://10.77.0.1:5000/v2"},
		{Registry: "", URL: "http://10.77.0.1:5000"},
		{Registry: "../etc", URL: "http://10.77.0.1:5000"},
	} {
		if _, err := HostsTOML(m); err == nil {
			t.Errorf("%+v: accepted", m)
		}
	}
}

func TestParseHosts(t *testing.T) {
	ours, err := HostsTOML(Mirror{Registry: "quay.io", URL: "https://mirror.lan:5000"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, data string
		first      string
		hosts      int
	}{
		{"rendered", string(ours), "https://mirror.lan:5000", 1},
		// containerd's docs: two mirrors tried in order, then the registry.
		{"a user's, in order", `server = "https://registry-1.docker.io"
[host."http://b.lan:5000"]
  capabilities = ["pull", "resolve"]
[host."http://a.lan:5000"]
  capabilities = ["pull"]
`, "http://b.lan:5000", 2},
		{"server only", `server = "https://registry.lan"` + "\n", "https://registry.lan", 0},
	} {
		h, err := ParseHosts([]byte(tc.data))
		if err != nil || h.First() != tc.first || len(h.Hosts) != tc.hosts {
			t.Errorf("%s: %+v (first %s), %v; want first %s of %d hosts", tc.name, h, h.First(), err, tc.first, tc.hosts)
		}
	}
	if _, err := ParseHosts([]byte("server = ")); err == nil {
		t.Error("a broken hosts.toml parsed")
	}
}
