package netplan

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// DisabledSuffix is what a competing file is renamed with: netplan reads
// only *.yaml, so the file stays beside the others, where its owner looks
// for it, and comes back with one mv.
const DisabledSuffix = ".homelab-disabled"

// NIC is the interface a node's address is declared on.
type NIC struct {
	// Name is the interface's name once netplan set it (nodes[].interface).
	Name string
	// MAC is canonical (aa:bb:cc:dd:ee:ff) or empty.
	MAC string
}

// Competing is what other netplan files say about the NIC.
type Competing struct {
	// Disable are files whose every device definition configures the NIC:
	// moved aside (DisabledSuffix), nothing else is lost.
	Disable []string
	// Problems are files that configure the NIC beside other devices, or
	// that netplan could not read: a file cannot be moved aside without
	// losing the rest, so the user edits it. Each names the file and the fix.
	Problems []string
}

// foreign is the part of a netplan file this package reads.
type foreign struct {
	Network struct {
		Ethernets map[string]device `json:"ethernets"`
		Bonds     map[string]device `json:"bonds"`
		Bridges   map[string]device `json:"bridges"`
		VLANs     map[string]device `json:"vlans"`
		Wifis     map[string]device `json:"wifis"`
	} `json:"network"`
}

type device struct {
	Match *struct {
		Name       string `json:"name"`
		MACAddress string `json:"macaddress"`
	} `json:"match"`
	SetName string `json:"set-name"`
}

// FindCompeting reads the node's other netplan files (path -> content;
// ours is not among them) and sorts out those that also configure nic: a
// second definition of the NIC keeps a DHCP client (or another address)
// beside the static one, which is how the seed's node moved. A device
// matched by driver alone is not recognised: netplan sees the hardware,
// this sees only the text.
func FindCompeting(files map[string][]byte, nic NIC) Competing {
	var out Competing
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		var f foreign
		if err := yaml.Unmarshal(files[p], &f); err != nil {
			out.Problems = append(out.Problems, fmt.Sprintf("%s: not readable as netplan YAML (%v); fix or remove it, netplan refuses it too", p, err))
			continue
		}
		var ours, others []string
		n := f.Network
		for _, group := range []map[string]device{n.Ethernets, n.Bonds, n.Bridges, n.VLANs, n.Wifis} {
			for id, d := range group {
				if d.configures(id, nic) {
					ours = append(ours, id)
				} else {
					others = append(others, id)
				}
			}
		}
		sort.Strings(ours)
		sort.Strings(others)
		switch {
		case len(ours) == 0:
		case len(others) == 0:
			out.Disable = append(out.Disable, p)
		default:
			out.Problems = append(out.Problems, fmt.Sprintf("%s configures %s (as %s) beside %s; remove %s from it (homelab's %s owns that interface), or move the others to a file of their own",
				p, nic.Name, strings.Join(ours, ", "), strings.Join(others, ", "), strings.Join(ours, ", "), Path))
		}
	}
	return out
}

// configures reports whether the definition id applies to nic: by its
// name (the id itself when nothing is matched), by the name it sets, or by
// its match, every criterion of which must hold as in netplan.
func (d device) configures(id string, nic NIC) bool {
	if d.SetName == nic.Name {
		return true
	}
	m := d.Match
	if m == nil {
		return id == nic.Name
	}
	if m.MACAddress == "" && m.Name == "" {
		return false // by driver alone: see FindCompeting
	}
	if m.MACAddress != "" && (nic.MAC == "" || !strings.EqualFold(m.MACAddress, nic.MAC)) {
		return false
	}
	if m.Name != "" {
		ok, err := path.Match(m.Name, nic.Name)
		return err == nil && ok
	}
	return true
}
