package netplan

import (
	"encoding/base64"
	"slices"
	"testing"
)

func TestParseRead(t *testing.T) {
	dhcp := base64.StdEncoding.EncodeToString([]byte("network:\n  ethernets:\n    eth0: {dhcp4: true}\n"))
	cases := []struct {
		name    string
		out     string
		want    Live
		wantErr bool
	}{
		{name: "as an installer leaves a node", out: "netplan yes\nours -\nnetworkfile /run/systemd/network/10-netplan-eth0.network\nfile /etc/netplan/50-cloud-init.yaml " + dhcp + "\n",
			want: Live{Installed: true, NetworkFile: NetworkFileFor("eth0"), Competing: Competing{Disable: []string{"/etc/netplan/50-cloud-init.yaml"}}}},
		{name: "converged", out: "netplan yes\nours abc\nnetworkfile /run/systemd/network/10-netplan-eth0.network\n",
			want: Live{Installed: true, Sha256: "abc", NetworkFile: NetworkFileFor("eth0")}},
		{name: "no netplan, nothing configures the NIC", out: "netplan no\nours -\nnetworkfile\n", want: Live{}},
		{name: "an empty file", out: "netplan yes\nours abc\nnetworkfile\nfile /etc/netplan/00-empty.yaml\n", want: Live{Installed: true, Sha256: "abc"}},
		{name: "a line it does not know", out: "netplan yes\nsomething else here\n", wantErr: true},
		{name: "bad base64", out: "file /etc/netplan/a.yaml !!!\n", wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseRead(c.out, NIC{Name: "eth0"})
			if (err != nil) != c.wantErr {
				t.Fatalf("error %v, want one: %v", err, c.wantErr)
			}
			if c.wantErr {
				return
			}
			if got.Installed != c.want.Installed || got.Sha256 != c.want.Sha256 || got.NetworkFile != c.want.NetworkFile ||
				!slices.Equal(got.Disable, c.want.Disable) || len(got.Problems) != len(c.want.Problems) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}
