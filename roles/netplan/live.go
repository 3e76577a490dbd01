package netplan

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// Live is a node's netplan as the netplan/read script reports it; the
// provider converges it and doctor reports it, from this one parse.
type Live struct {
	// Installed is whether the node has netplan.
	Installed bool
	// Sha256 is homelab's file's checksum ("" when absent).
	Sha256 string
	// NetworkFile is the systemd-networkd file that configures the NIC
	// ("" when none does): NetworkFileFor(nic) when homelab's definition
	// owns it.
	NetworkFile string
	// Competing is what the node's other netplan files say about the NIC.
	Competing
}

// NetworkFileFor is the file netplan generates for systemd-networkd from
// the definition of the NIC named name, homelab's: 60-homelab.yaml
// defines the NIC under its interface name.
func NetworkFileFor(name string) string {
	return "/run/systemd/network/10-netplan-" + name + ".network"
}

// ParseRead reads the netplan/read script's answer for nic.
func ParseRead(out string, nic NIC) (Live, error) {
	var l Live
	others := map[string][]byte{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "netplan":
			l.Installed = f[1] == "yes"
		case len(f) == 2 && f[0] == "ours":
			if f[1] != "-" {
				l.Sha256 = f[1]
			}
		case len(f) <= 2 && len(f) >= 1 && f[0] == "networkfile":
			if len(f) == 2 {
				l.NetworkFile = f[1]
			}
		case len(f) >= 2 && f[0] == "file":
			var b []byte
			if len(f) == 3 {
				var err error
				if b, err = base64.StdEncoding.DecodeString(f[2]); err != nil {
					return l, fmt.Errorf("%s: %w", f[1], err)
				}
			}
			others[f[1]] = b
		default:
			return l, fmt.Errorf("unexpected line %q", line)
		}
	}
	l.Competing = FindCompeting(others, nic)
	return l, nil
}
