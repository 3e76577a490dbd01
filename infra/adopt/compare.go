package adopt

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/cilium"
	"github.com/homelab-dev/homelab/roles/keepalived"
	"github.com/homelab-dev/homelab/roles/kubeadm"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// Status of one comparison.
type Status string

const (
	OK      Status = "ok"
	Differs Status = "differs"
	Missing Status = "missing"
)

// Check names of the comparison's rows, in the order they are printed.
const (
	CheckNode       = "node"
	CheckEtcd       = "etcd member"
	CheckEndpoint   = "endpoint"
	CheckAPISANs    = "api sans"
	CheckKeepalived = "keepalived"
	CheckEncryption = "encryption"
	CheckKubeadm    = "kubeadm"
	CheckCNI        = "pod network"
)

// Check is one row: what was compared where, its status, what was found,
// and what changes it (by up, or by the user).
type Check struct {
	Check, Where string
	Status       Status
	Detail       string
	Change       string
}

// NodePlan is what adopt does about one node's kubeadm state.
type NodePlan struct {
	Node string
	// Marker is the completion marker the provider looks for on this node
	// (the init marker on the inventory's first control-plane node).
	Marker string
	// Verified: kubeadm fully set the node up (its files exist, its Node
	// is in the API with the declared role; for a control-plane node its
	// apiserver manifest and etcd member exist). Only verified nodes are
	// marked.
	Verified bool
	// Marked: the marker was there already.
	Marked bool
	// Lacks says why a node is not verified.
	Lacks []string
	// Partial: kubeadm left files on an unverified node; up resets it
	// (CAs kept) before setting it up again.
	Partial bool
}

// NeedsMarker reports whether adopt writes this node's marker.
func (p NodePlan) NeedsMarker() bool { return p.Verified && !p.Marked }

// Plan decides, node by node, whether kubeadm fully set it up.
func Plan(inv *inventory.Inventory, live *Live) []NodePlan {
	var out []NodePlan
	first := inv.ControlPlanes()[0].Name
	for _, n := range inv.Nodes {
		isFirst := n.Name == first
		files := nodefacts.CompletionFiles(isFirst, n.IsControlPlane())
		p := NodePlan{Node: n.Name, Marker: files[0]}
		f := live.Nodes[n.Name]
		if f == nil {
			f = &NodeFacts{Files: map[string]bool{}}
		}
		p.Marked = f.Files[p.Marker]
		if !slices.Contains(files, nodefacts.KubeletConf) {
			files = append(files, nodefacts.KubeletConf)
		}
		for _, file := range files[1:] {
			if !f.Files[file] {
				p.Lacks = append(p.Lacks, file)
			}
		}
		if an, ok := live.APINode(n.Name); !ok {
			p.Lacks = append(p.Lacks, "its Node in the API")
		} else if an.ControlPlane != n.IsControlPlane() {
			p.Lacks = append(p.Lacks, "a Node of its declared role ("+string(n.Role)+")")
		}
		if n.IsControlPlane() {
			if _, ok := live.Member(n.Name); !ok {
				p.Lacks = append(p.Lacks, "its etcd member")
			}
		}
		p.Verified = len(p.Lacks) == 0
		p.Partial = !p.Verified && f.HasKubeadmFiles()
		out = append(out, p)
	}
	return out
}

// VRRPKept is the VRRP password adopt keeps: the auth_pass of the first
// control-plane node (in the inventory's order) whose keepalived.conf has
// one, and that node; "" when none has.
func VRRPKept(inv *inventory.Inventory, live *Live) (password, node string) {
	for _, n := range inv.ControlPlanes() {
		if f := live.Nodes[n.Name]; f != nil {
			if pw := VRRPPassword(f.Keepalived); pw != "" {
				return pw, n.Name
			}
		}
	}
	return "", ""
}

// cniStatus compares a node's pod network with cluster.cni.
func cniStatus(cni string, f *NodeFacts) (Status, string, string) {
	switch {
	case f.CNIErr != nil && cni == inventory.CNINone:
		return Differs, "no pod network (the node is NotReady)", "cluster.cni is none: install your pod network"
	case f.CNIErr != nil:
		return OK, "none yet (the node is NotReady)", "up installs Cilium, whose agent writes " + cilium.ConfigFile
	case cni != inventory.CNINone && f.CNI.File != cilium.ConfigFile:
		return Differs, fmt.Sprintf("another pod network runs here: the runtime loads %s (network %q)", f.CNI.File, f.CNI.Name),
			"up would install Cilium over it: set cluster.cni: none to keep yours"
	}
	return OK, fmt.Sprintf("%s (network %q)", f.CNI.File, f.CNI.Name), ""
}

// OurKeyName is the name roles/kubeadm gives the secretbox key in the
// EncryptionConfiguration it renders.
const OurKeyName = "homelab"

// Compare sets the live cluster against the inventory, one row per check.
// plan is Plan's result.
func Compare(inv *inventory.Inventory, live *Live, plan []NodePlan) []Check {
	var out []Check
	add := func(check, where string, st Status, detail, change string) {
		out = append(out, Check{Check: check, Where: where, Status: st, Detail: detail, Change: change})
	}

	// Nodes in the API against the declared nodes.
	for i, n := range inv.Nodes {
		an, ok := live.APINode(n.Name)
		role := "worker"
		if n.IsControlPlane() {
			role = "control-plane"
		}
		switch {
		case !ok:
			add(CheckNode, n.Name, Missing, "no Node "+n.Name+" in the API", "up sets it up as a "+role+" node")
		case an.ControlPlane != n.IsControlPlane():
			live := "worker"
			if an.ControlPlane {
				live = "control-plane"
			}
			add(CheckNode, n.Name, Differs, fmt.Sprintf("registered as a %s node, declared %s", live, role),
				fmt.Sprintf("set nodes[%d].role to the node's real role (not marked: up would reset it)", i))
		case an.InternalIP != n.Address:
			add(CheckNode, n.Name, Differs, fmt.Sprintf("InternalIP %s, declared %s", an.InternalIP, n.Address),
				fmt.Sprintf("set nodes[%d].address to %s if the node is there", i, an.InternalIP))
		default:
			add(CheckNode, n.Name, OK, fmt.Sprintf("%s %s", role, an.InternalIP), "")
		}
	}
	for _, an := range live.APINodes {
		if _, declared := inv.Node(an.Name); !declared {
			add(CheckNode, an.Name, Differs, fmt.Sprintf("Node %s (%s) is not in the inventory", an.Name, an.InternalIP),
				"declare it in nodes[], or drain and delete it; up leaves it alone")
		}
	}

	// etcd members against the declared control-plane nodes.
	for _, n := range inv.ControlPlanes() {
		want := "https://" + net.JoinHostPort(n.Address, "2380")
		m, ok := live.Member(n.Name)
		switch {
		case !ok:
			add(CheckEtcd, n.Name, Missing, "no etcd member "+n.Name, "up joins it as a control-plane node, which adds its member")
		case m.PeerURL != want:
			add(CheckEtcd, n.Name, Differs, fmt.Sprintf("peer URL %s, want %s", m.PeerURL, want), "up updates the member's peer URL (EtcdMembers)")
		default:
			add(CheckEtcd, n.Name, OK, "peer URL "+m.PeerURL, "")
		}
	}
	for _, m := range live.Members {
		n, declared := inv.Node(m.Name)
		switch {
		case m.Name == "":
			add(CheckEtcd, fmt.Sprintf("%x", m.ID), Differs, "member "+m.PeerURL+" has not started (a join in progress?)",
				"let the join finish or remove the member; up leaves unstarted members alone")
		case !declared || !n.IsControlPlane():
			add(CheckEtcd, m.Name, Differs, fmt.Sprintf("member %s (%s) is not a declared control-plane node", m.Name, m.PeerURL),
				"up REMOVES this member (EtcdMembers): declare the node as a control-plane node if it is a live one")
		}
	}

	// The pod network: up installs Cilium, which must not land on top of
	// another CNI the cluster already runs.
	for _, n := range inv.Nodes {
		if f := live.Nodes[n.Name]; f != nil && f.CNIRead {
			st, detail, change := cniStatus(inv.Cluster.CNI, f)
			add(CheckCNI, n.Name, st, detail, change)
		}
	}

	// The endpoint kubeadm baked into the cluster.
	want := inv.Endpoint()
	if sameEndpoint(live.ControlPlaneEndpoint, want, inv.Cluster.Endpoint.Port) {
		add(CheckEndpoint, "kubeadm-config", OK, "controlPlaneEndpoint "+live.ControlPlaneEndpoint, "")
	} else {
		got := live.ControlPlaneEndpoint
		if got == "" {
			got = "(none: the first node's own address)"
		}
		add(CheckEndpoint, "kubeadm-config", Differs, fmt.Sprintf("controlPlaneEndpoint %s, the inventory's is %s", got, want),
			"set cluster.endpoint to the cluster's, or move the cluster to the new endpoint first (kubeconfigs, certificates, kubeadm-config): up does not")
	}

	// The API certificate's SANs against the required set.
	api, _ := nodefacts.ServingCertOf(nodefacts.APIServerCert)
	required, allowed := api.Required(inv), api.AllowedExtras()
	for _, n := range inv.ControlPlanes() {
		f := live.Nodes[n.Name]
		where := n.Name + ":" + nodefacts.PKIFile(nodefacts.APIServerCert)
		if f == nil || f.APIServerCert == nil {
			add(CheckAPISANs, where, Missing, "no apiserver.crt", "up creates it when it sets the node up")
			continue
		}
		addSANs(add, where, nodefacts.SANs(f.APIServerCert), required, allowed,
			"up regenerates it with the required SANs (ControlPlaneAddress); the apiserver reloads it")
	}
	served := "served at " + inv.Endpoint()
	if live.ServedErr != nil || live.Served == nil {
		add(CheckAPISANs, served, Missing, fmt.Sprintf("no TLS handshake: %v", live.ServedErr), "check the endpoint (keepalived holds the VIP in the vip layout)")
	} else {
		addSANs(add, served, live.Served, required, allowed, "up regenerates every control-plane node's apiserver.crt with the required SANs")
	}

	// keepalived's VRRP password.
	if inv.Cluster.Endpoint.Layout == inventory.LayoutVIP {
		kept, from := VRRPKept(inv, live)
		for _, n := range inv.ControlPlanes() {
			f := live.Nodes[n.Name]
			where := n.Name + ":" + keepalived.ConfigPath
			switch pw := VRRPPassword(f.keepalived()); {
			case f == nil || f.Keepalived == nil:
				add(CheckKeepalived, where, Missing, "no keepalived config", "up installs ours and starts keepalived")
			case pw == "":
				add(CheckKeepalived, where, OK, "no auth_pass (VRRPv3 or no authentication): no password to keep", "up rewrites the config with ours and restarts keepalived")
			case pw != kept:
				add(CheckKeepalived, where, Differs, "its auth_pass differs from "+from+"'s, which the bundle keeps",
					"up rewrites the config with "+from+"'s password and restarts keepalived")
			default:
				add(CheckKeepalived, where, OK, "auth_pass kept as the bundle's VRRP password", "up rewrites the config with ours (same password) and restarts keepalived")
			}
		}
	}

	out = append(out, encryptionCheck(live))

	// Each node's kubeadm state: marked, or left to up.
	for _, p := range plan {
		switch {
		case p.Verified && p.Marked:
			add(CheckKubeadm, p.Node, OK, "set up by kubeadm; "+p.Marker+" already there", "")
		case p.Verified:
			add(CheckKubeadm, p.Node, OK, "set up by kubeadm", "adopt writes "+p.Marker+", so up adopts it as it is")
		case p.Partial:
			add(CheckKubeadm, p.Node, Differs, "kubeadm files, but lacks "+strings.Join(p.Lacks, ", "),
				"not marked: will be joined/reset by up (reset with the CAs kept, then set up again)")
		default:
			add(CheckKubeadm, p.Node, Missing, "not set up by kubeadm", "not marked: will be joined by up")
		}
	}
	return out
}

func (f *NodeFacts) keepalived() []byte {
	if f == nil {
		return nil
	}
	return f.Keepalived
}

func addSANs(add func(check, where string, st Status, detail, change string), where string, have, want, allowed []string, change string) {
	missing, extra := nodefacts.CompareSANs(have, want, allowed)
	if len(missing) == 0 && len(extra) == 0 {
		add(CheckAPISANs, where, OK, fmt.Sprintf("the required %d SANs", len(want)), "")
		return
	}
	add(CheckAPISANs, where, Differs, fmt.Sprintf("lacks [%s], has extra [%s]", strings.Join(missing, " "), strings.Join(extra, " ")), change)
}

// sameEndpoint compares host:port endpoints, a missing port being port.
func sameEndpoint(a, b string, port int) bool {
	norm := func(s string) string {
		s = strings.TrimPrefix(s, "https://")
		if u, err := url.Parse("https://" + s); err == nil && u.Port() == "" && s != "" {
			return net.JoinHostPort(strings.Trim(u.Hostname(), "[]"), strconv.Itoa(port))
		}
		return s
	}
	return norm(a) == norm(b)
}

func encryptionCheck(live *Live) Check {
	e := live.Encryption
	c := Check{Check: CheckEncryption, Where: live.Source + ":kube-apiserver"}
	ours := kubeadm.EncryptionConfig
	elsewhere := ""
	if e.HostPath != "" && e.HostPath != ours {
		elsewhere = fmt.Sprintf("; the apiserver reads %s, ours goes to %s", e.HostPath, ours)
	}
	var others []string
	for _, p := range e.Providers {
		if p != "secretbox" && p != "identity" && !slices.Contains(others, p) {
			others = append(others, p)
		}
	}
	switch {
	case e.Flag == "":
		c.Status, c.Detail = Missing, "no --encryption-provider-config: Secrets are stored in plain text"
		c.Change = "up adds ours (a new secretbox key first, identity last, so the existing plain Secrets stay readable); " +
			"and regenerates each apiserver's manifest with it, one control-plane node at a time; then rewrite Secrets to encrypt them"
	case e.Err != nil:
		c.Status, c.Detail = Differs, fmt.Sprintf("%s: %v", e.HostPath, e.Err)
		c.Change = "fix or remove the apiserver's encryption config, then adopt again: its key cannot be kept"
	case len(others) > 0:
		c.Status = Differs
		c.Detail = fmt.Sprintf("providers %s: ours has only secretbox and identity%s", strings.Join(e.Providers, ", "), elsewhere)
		c.Change = "before the apiserver loads ours, rewrite every Secret with secretbox or identity first (kubectl get secrets -A -o json | kubectl replace -f -): Secrets stored with " +
			strings.Join(others, ", ") + " would become unreadable"
	case e.SecretboxKey == "":
		c.Status, c.Detail = Missing, "identity only: Secrets are stored in plain text"+elsewhere
		c.Change = "up adds a secretbox key first, identity stays last so plain Secrets stay readable"
	case e.SecretboxKeyName != OurKeyName:
		c.Status = Differs
		c.Detail = fmt.Sprintf("secretbox key %q kept in the bundle, but ours is named %q%s", e.SecretboxKeyName, OurKeyName, elsewhere)
		c.Change = "the apiserver finds a Secret's key by the name stored with it: before it loads ours, put a key named " + OurKeyName +
			" with the same secret first in the current config and rewrite every Secret (kubectl get secrets -A -o json | kubectl replace -f -)"
	default:
		c.Status, c.Detail = OK, "secretbox key kept in the bundle (providers "+strings.Join(e.Providers, ", ")+")"+elsewhere
	}
	return c
}
