package cniconf

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const cilium = `{"cniVersion":"0.3.1","name":"cilium","plugins":[{"type":"cilium-cni","enable-debug":false}]}`

func TestChoose(t *testing.T) {
	cases := []struct {
		name    string
		files   map[string]string // "" content: a directory
		want    string            // the file taken; "" none
		plugins []string
		errHas  string
	}{
		{"empty directory", nil, "", nil, "no network config found in /etc/cni/net.d"},
		{"Cilium's config", map[string]string{"05-cilium.conflist": cilium}, "05-cilium.conflist", []string{"cilium-cni"}, ""},
		{"other extensions ignored", map[string]string{"05-cilium.conflist.cilium_bak": cilium, "README": "x", "10-x.yaml": "a: b"}, "", nil, "no network config found"},
		{"the lexically first wins", map[string]string{"10-flannel.conflist": `{"name":"cbr0","plugins":[{"type":"flannel"},{"type":"portmap"}]}`, "05-cilium.conflist": cilium},
			"05-cilium.conflist", []string{"cilium-cni"}, ""},
		{"a single plugin .conf", map[string]string{"10-bridge.conf": `{"cniVersion":"0.4.0","name":"bridge","type":"bridge"}`}, "10-bridge.conf", []string{"bridge"}, ""},
		{".json counts as a conf", map[string]string{"99-x.json": `{"name":"x","type":"macvlan"}`}, "99-x.json", []string{"macvlan"}, ""},
		{"a broken first file is not skipped", map[string]string{"00-broken.conflist": `{"name":`, "05-cilium.conflist": cilium}, "", nil, "00-broken.conflist: error parsing configuration list"},
		{"conflist without name", map[string]string{"05-x.conflist": `{"plugins":[{"type":"x"}]}`}, "", nil, "no name"},
		{"conflist without plugins", map[string]string{"05-x.conflist": `{"name":"x","plugins":[]}`}, "", nil, "no plugins in list"},
		{"plugin without type", map[string]string{"05-x.conflist": `{"name":"x","plugins":[{"foo":1}]}`}, "", nil, "missing 'type'"},
		{"a conflist in a .conf file", map[string]string{"05-x.conf": cilium}, "", nil, "missing 'type'"},
		{"a directory named like a config", map[string]string{"00-dir.conf": "", "05-cilium.conflist": cilium}, "05-cilium.conflist", []string{"cilium-cni"}, ""},
	}
	for _, tc := range cases {
		var entries []Entry
		for n, c := range tc.files {
			entries = append(entries, Entry{Name: n, IsDir: c == ""})
		}
		n, err := Choose(ConfDir, entries, func(name string) ([]byte, error) {
			c, ok := tc.files[name]
			if !ok {
				return nil, fs.ErrNotExist
			}
			return []byte(c), nil
		})
		if tc.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errHas) || !errors.Is(err, ErrNotInitialized) {
				t.Errorf("%s: err %v, want one saying %q", tc.name, err, tc.errHas)
			}
			continue
		}
		if err != nil || n.File != tc.want || !slices.Equal(n.Plugins, tc.plugins) {
			t.Errorf("%s: %+v %v, want %s with %v", tc.name, n, err, tc.want, tc.plugins)
		}
	}
}

func TestLoadAndMissingPlugins(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "absent")); !errors.Is(err, ErrNotInitialized) {
		t.Errorf("missing directory: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "05-cilium.conflist"), []byte(cilium), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := Load(dir)
	if err != nil || n.Name != "cilium" {
		t.Fatalf("Load: %+v %v", n, err)
	}
	bin := t.TempDir()
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	if m := MissingPlugins(n, exists, bin); !slices.Equal(m, []string{"cilium-cni"}) {
		t.Errorf("missing %v", m)
	}
	os.WriteFile(filepath.Join(bin, "cilium-cni"), nil, 0o755)
	if m := MissingPlugins(n, exists, bin); len(m) != 0 {
		t.Errorf("missing %v with the binary there", m)
	}
}
