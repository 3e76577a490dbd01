package containerd

import (
	"bytes"
	"fmt"
	"net/url"
	"path"

	"github.com/BurntSushi/toml"
)

// Mirror is a registry mirror: pulls of images named Registry
// (registry.k8s.io) go to URL (http://10.77.0.1:5000) and nowhere else,
// as on an air-gapped node where the upstream registry cannot answer.
type Mirror struct {
	Registry string
	URL      string
}

// HostsPath is where containerd reads the mirror of registry from, with
// config_path set to CertsD (Render sets it).
func HostsPath(registry string) string { return path.Join(CertsD, registry, "hosts.toml") }

// hosts is containerd's hosts.toml (docs/hosts.md), the same for 1.x and
// 2.x.
type hosts struct {
	Server string                 `toml:"server"`
	Host   map[string]hostSection `toml:"host"`
}

type hostSection struct {
	Capabilities []string `toml:"capabilities"`
	// SkipVerify stays false: an https mirror is verified as the
	// registry would be.
}

// HostsTOML renders m's hosts.toml. The mirror is both the only host
// tried and the server: with the upstream as server, containerd falls
// back to it after the mirror's 404, and an air-gapped node then waits
// on a lookup that never answers instead of failing with the mirror's
// "not found".
func HostsTOML(m Mirror) ([]byte, error) {
	u, err := url.Parse(m.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("containerd: mirror %q of %s: want http(s)://HOST[:PORT]", m.URL, m.Registry)
	}
	if m.Registry == "" || path.Base(m.Registry) != m.Registry {
		return nil, fmt.Errorf("containerd: mirror of %q: want a registry host such as registry.k8s.io", m.Registry)
	}
	base := u.Scheme + "://" + u.Host
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Rendered by homelab: pulls from %s go to its mirror only.\n", m.Registry)
	err = toml.NewEncoder(&b).Encode(hosts{
		Server: base,
		Host:   map[string]hostSection{base: {Capabilities: []string{"pull", "resolve"}}},
	})
	return b.Bytes(), err
}

// Hosts is a hosts.toml as containerd uses it: the hosts it tries, in the
// file's order, then the server (the registry itself when unset).
type Hosts struct {
	Server string
	Hosts  []string
}

// First is where a pull goes first: the first host, else the server.
func (h Hosts) First() string {
	if len(h.Hosts) > 0 {
		return h.Hosts[0]
	}
	return h.Server
}

// ParseHosts reads a hosts.toml, whoever wrote it.
func ParseHosts(data []byte) (Hosts, error) {
	var raw hosts
	md, err := toml.Decode(string(data), &raw)
	if err != nil {
		return Hosts{}, fmt.Errorf("hosts.toml: %w", err)
	}
	out := Hosts{Server: raw.Server}
	// The [host."URL"] tables' order is the order containerd tries them.
	for _, k := range md.Keys() {
		if len(k) == 2 && k[0] == "host" {
			out.Hosts = append(out.Hosts, k[1])
		}
	}
	return out, nil
}
