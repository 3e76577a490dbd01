package netplan

import (
	"slices"
	"strings"
	"testing"
)

func TestFindCompeting(t *testing.T) {
	nic := NIC{Name: "eth0", MAC: "52:54:00:0a:00:78"}
	cases := []struct {
		name        string
		file        string
		wantDisable bool
		wantProblem string // a word the problem must name; "" for none
	}{
		{"cloud-init's DHCP by name", "network:\n  version: 2\n  ethernets:\n    eth0:\n      dhcp4: true\n", true, ""},
		{"matched by MAC, renamed", "network:\n  ethernets:\n    nic0:\n      match: {macaddress: \"52:54:00:0A:00:78\"}\n      set-name: eth0\n      dhcp4: yes\n", true, ""},
		{"matched by MAC alone", "network:\n  ethernets:\n    id0:\n      match: {macaddress: \"52:54:00:0a:00:78\"}\n      dhcp4: true\n", true, ""},
		{"a name glob", "network:\n  ethernets:\n    all-en:\n      match: {name: \"eth*\"}\n      dhcp4: true\n", true, ""},
		{"a glob and another MAC", "network:\n  ethernets:\n    other:\n      match: {name: \"eth*\", macaddress: \"52:54:00:0a:00:99\"}\n      dhcp4: true\n", false, ""},
		{"another interface", "network:\n  ethernets:\n    eth1:\n      dhcp4: true\n", false, ""},
		{"by driver only", "network:\n  ethernets:\n    any:\n      match: {driver: virtio_net}\n      dhcp4: true\n", false, ""},
		{"a bridge renaming onto the name", "network:\n  bridges:\n    br0:\n      set-name: eth0\n", true, ""},
		{"beside another device", "network:\n  ethernets:\n    eth0: {dhcp4: true}\n    eth1: {dhcp4: true}\n", false, "eth1"},
		{"not YAML", "network: [\n", false, "not readable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := FindCompeting(map[string][]byte{"/etc/netplan/50-x.yaml": []byte(c.file)}, nic)
			if disabled := slices.Contains(got.Disable, "/etc/netplan/50-x.yaml"); disabled != c.wantDisable {
				t.Errorf("moved aside: %v, want %v", disabled, c.wantDisable)
			}
			switch {
			case c.wantProblem == "" && len(got.Problems) > 0:
				t.Errorf("problems %v", got.Problems)
			case c.wantProblem != "" && (len(got.Problems) != 1 || !strings.Contains(got.Problems[0], c.wantProblem) || !strings.Contains(got.Problems[0], "50-x.yaml")):
				t.Errorf("problems %v: want one naming the file and %q", got.Problems, c.wantProblem)
			}
		})
	}
}

// Every file is judged, in path order, and one problem does not hide
// another file's.
func TestFindCompetingEveryFile(t *testing.T) {
	got := FindCompeting(map[string][]byte{
		"/etc/netplan/50-b.yaml": []byte("network:\n  ethernets:\n    eth0: {dhcp4: true}\n"),
		"/etc/netplan/00-a.yaml": []byte("network:\n  ethernets:\n    eth0: {dhcp4: true}\n"),
		"/etc/netplan/70-c.yaml": []byte("network: ["),
	}, NIC{Name: "eth0"})
	if want := []string{"/etc/netplan/00-a.yaml", "/etc/netplan/50-b.yaml"}; !slices.Equal(got.Disable, want) {
		t.Errorf("disable %v, want %v", got.Disable, want)
	}
	if len(got.Problems) != 1 {
		t.Errorf("problems %v", got.Problems)
	}
}
