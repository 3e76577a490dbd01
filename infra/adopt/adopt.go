// Package adopt takes over a cluster kubeadm already built: it reads the
// cluster's PKI into a secrets bundle (Talos machinery's
// NewBundleFromKubernetesPKI), keeping what the cluster has where our
// renderers would otherwise change it (keepalived's VRRP password, the
// secretbox key of an encryption config), compares the live cluster with
// the inventory, and marks each node kubeadm fully set up as complete, so
// the provider adopts it instead of resetting it as an interrupted run.
//
// Prepare reads and writes nothing; Mark writes the markers and nothing
// else. Storing the bundle and previewing the plan are the caller's
// (cmd/homelab adopt, with infra/stack).
package adopt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/infra/stack"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/nodefacts"
	"github.com/homelab-dev/homelab/roles/pki"
)

// Target is the cluster to adopt and how to reach its nodes.
type Target struct {
	Inventory  *inventory.Inventory
	PrivateKey []byte
	KnownHosts string
	// From names the control-plane node to read the PKI, admin.conf and
	// etcd through; default the inventory's first control-plane node that
	// has the cluster's CA key.
	From string
	// Dial opens SSH transport connections; default a plain TCP dial from
	// this process's namespace.
	Dial ssh.DialFunc
	// CommandLog, when set, receives every command run on a node.
	CommandLog string
}

// Adoption is what Prepare found and decided.
type Adoption struct {
	Live *Live
	// Bundle is the cluster's PKI with what it keeps (VRRP password,
	// secretbox key) and fresh secrets for the rest.
	Bundle *pki.Bundle
	// Kept says what of the cluster's own the bundle keeps, in words.
	Kept []string
	// VRRPFrom is the node whose auth_pass the bundle keeps, KeyFrom the
	// encryption config whose secretbox key it keeps ("" when none).
	VRRPFrom, KeyFrom string
	Checks            []Check
	Plan              []NodePlan

	clients map[string]*ssh.Client
}

// Close closes the SSH connections.
func (a *Adoption) Close() {
	for _, c := range a.clients {
		c.Close()
	}
}

// Prepare reads every declared node and the cluster, builds the bundle,
// compares and plans. It writes nothing anywhere. Bad input is an error
// naming the node or field and the fix: a node it cannot reach, a node
// whose CA is another cluster's, --from naming no control-plane node.
func Prepare(ctx context.Context, t Target) (*Adoption, error) {
	inv := t.Inventory
	if inv == nil || len(inv.ControlPlanes()) == 0 {
		return nil, errors.New("adopt needs an inventory with at least one control-plane node")
	}
	if t.From != "" {
		n, ok := inv.Node(t.From)
		if !ok || !n.IsControlPlane() {
			return nil, fmt.Errorf("--from %s: not a control-plane node of the inventory", t.From)
		}
	}
	clients, err := dialAll(ctx, t)
	if err != nil {
		return nil, err
	}
	a := &Adoption{clients: clients}
	if err := a.prepare(ctx, t); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

func (a *Adoption) prepare(ctx context.Context, t Target) error {
	inv := t.Inventory
	live := &Live{Nodes: map[string]*NodeFacts{}}
	a.Live = live
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(inv.Nodes))
	for i, n := range inv.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := probeNode(ctx, a.clients[n.Name], n)
			if err != nil {
				errs[i] = err
				return
			}
			mu.Lock()
			live.Nodes[n.Name] = f
			mu.Unlock()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	source, err := pickSource(inv, live, t.From)
	if err != nil {
		return err
	}
	live.Source = source.Name
	if err := sameCA(inv, live); err != nil {
		return err
	}
	c := a.clients[source.Name]
	if a.Bundle, err = ReadBundle(ctx, c, source.Name); err != nil {
		return err
	}
	if pw, from := VRRPKept(inv, live); pw != "" {
		a.Bundle.VRRPPassword, a.VRRPFrom = pw, from
		a.Kept = append(a.Kept, "keepalived's VRRP password (auth_pass on "+from+")")
	}
	manifest, err := c.Read(ctx, nodefacts.Manifest(nodefacts.KubeAPIServer))
	if err != nil {
		return fmt.Errorf("%s: reading %s: %w", source.Name, nodefacts.Manifest(nodefacts.KubeAPIServer), err)
	}
	live.Encryption = readEncryption(ctx, c, manifest)
	if key := live.Encryption.SecretboxKey; key != "" {
		a.Bundle.Talos.Secrets.SecretboxEncryptionSecret, a.KeyFrom = key, live.Encryption.HostPath
		a.Kept = append(a.Kept, fmt.Sprintf("the secretbox key %q of %s", live.Encryption.SecretboxKeyName, live.Encryption.HostPath))
	}
	if err := a.Bundle.Validate(); err != nil {
		return err
	}
	if err := readCluster(ctx, inv, c, source, a.Bundle, live); err != nil {
		return err
	}
	a.Plan = Plan(inv, live)
	a.Checks = Compare(inv, live, a.Plan)
	verified := false
	for _, p := range a.Plan {
		if p.Verified && isControlPlane(inv, p.Node) {
			verified = true
		}
	}
	if !verified {
		return fmt.Errorf("no control-plane node of the inventory is fully set up by kubeadm (see the kubeadm rows): nothing to adopt; check the inventory's node names, or build the cluster with homelab up")
	}
	return nil
}

func isControlPlane(inv *inventory.Inventory, name string) bool {
	n, ok := inv.Node(name)
	return ok && n.IsControlPlane()
}

func readEncryption(ctx context.Context, r Reader, manifest []byte) Encryption {
	flag, host, err := EncryptionFlag(manifest)
	if err != nil || flag == "" {
		return Encryption{Err: err}
	}
	data, err := r.Read(ctx, host)
	if err != nil {
		return Encryption{Flag: flag, HostPath: host, Err: err}
	}
	e, err := ParseEncryption(data)
	e.Flag, e.HostPath, e.Err = flag, host, err
	return e
}

// pickSource is --from, else the first control-plane node holding the CA
// key.
func pickSource(inv *inventory.Inventory, live *Live, from string) (inventory.Node, error) {
	if from != "" {
		n, _ := inv.Node(from)
		if !live.Nodes[from].Files[nodefacts.CAKey] {
			return n, fmt.Errorf("--from %s: it has no %s: name a control-plane node kubeadm set up", from, nodefacts.CAKey)
		}
		return n, nil
	}
	for _, n := range inv.ControlPlanes() {
		if live.Nodes[n.Name].Files[nodefacts.CAKey] {
			return n, nil
		}
	}
	return inventory.Node{}, fmt.Errorf("no control-plane node has %s: none was set up by kubeadm (is this the right inventory?)", nodefacts.CAKey)
}

// sameCA refuses a node whose CA is another cluster's: one adoption takes
// one cluster.
func sameCA(inv *inventory.Inventory, live *Live) error {
	src := live.Nodes[live.Source]
	var errs []error
	for i, n := range inv.Nodes {
		f := live.Nodes[n.Name]
		if f.CACert != nil && !bytes.Equal(f.CACert, src.CACert) {
			errs = append(errs, fmt.Errorf("%s (nodes[%d]): its %s (%s) is not %s's (%s): it belongs to another cluster; reset it (kubeadm reset) so up joins it, or remove it from the inventory",
				n.Name, i, nodefacts.CACert, subject(f.CACert), live.Source, subject(src.CACert)))
		}
		if n.IsControlPlane() && f.EtcdCACert != nil && src.EtcdCACert != nil && !bytes.Equal(f.EtcdCACert, src.EtcdCACert) {
			errs = append(errs, fmt.Errorf("%s (nodes[%d]): its etcd CA is not %s's: it belongs to another etcd cluster; reset it (kubeadm reset) so up joins it, or remove it from the inventory",
				n.Name, i, live.Source))
		}
	}
	return errors.Join(errs...)
}

// Holds reports whether an existing bundle already is this cluster's: the
// same CAs and service-account key, and the VRRP password and secretbox
// key adopt keeps from the cluster, if it keeps them. Such a bundle is
// kept as it is (its bootstrap token included).
func (a *Adoption) Holds(old *pki.Bundle) bool {
	if !SameIdentity(old, a.Bundle) {
		return false
	}
	if a.VRRPFrom != "" && old.VRRPPassword != a.Bundle.VRRPPassword {
		return false
	}
	return a.KeyFrom == "" || old.EncryptionSecret() == a.Bundle.EncryptionSecret()
}

type markArgs struct{ Dir, Marker string }

// markScript writes marker, in a directory that must exist.
func markScript(marker string) scripts.Script {
	return scripts.Render("adopt/mark", markArgs{Dir: path.Dir(marker), Marker: marker})
}

// Mark writes the completion marker on every verified node that lacks it,
// printing each, and nothing else.
func (a *Adoption) Mark(ctx context.Context, w io.Writer) error {
	for _, p := range a.Plan {
		if !p.NeedsMarker() {
			continue
		}
		c := a.clients[p.Node]
		res, err := c.Run(ctx, markScript(p.Marker).String())
		if err != nil {
			return fmt.Errorf("%s: writing %s: %w", p.Node, p.Marker, err)
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("%s: writing %s: exit %d: %s", p.Node, p.Marker, res.ExitCode, bytes.TrimSpace(res.Stderr))
		}
		fmt.Fprintf(w, "marked %s: %s (kubeadm's run verified complete)\n", p.Node, p.Marker)
	}
	return nil
}

// WriteTable prints the comparison: CHECK, WHERE, STATUS, DETAIL, CHANGE.
func WriteTable(w io.Writer, checks []Check) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tWHERE\tSTATUS\tDETAIL\tCHANGE")
	for _, c := range checks {
		change := c.Change
		if change == "" {
			change = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Check, c.Where, c.Status, c.Detail, change)
	}
	tw.Flush()
}

// PlanSummary counts a preview's steps by operation and names the nodes
// on which up would run kubeadm (those adopt did not mark), in one line.
func PlanSummary(changes []stack.Change, plan []NodePlan) string {
	ops := map[string]int{}
	for _, c := range changes {
		ops[c.Op]++
	}
	var parts []string
	for _, op := range []string{"create", "update", "replace", "delete"} {
		parts = append(parts, fmt.Sprintf("%d to %s", ops[op], op))
	}
	var others []string
	for op, n := range ops {
		switch op {
		case "create", "update", "replace", "delete":
		default:
			others = append(others, fmt.Sprintf("%d %s", n, op))
		}
	}
	sort.Strings(others)
	parts = append(parts, others...)
	var joins, resets []string
	for _, p := range plan {
		switch {
		case p.Verified:
		case p.Partial:
			resets = append(resets, p.Node)
		default:
			joins = append(joins, p.Node)
		}
	}
	kubeadm := "no kubeadm init, join or reset on any node"
	if len(joins)+len(resets) > 0 {
		var k []string
		if len(joins) > 0 {
			k = append(k, "joins "+strings.Join(joins, ", "))
		}
		if len(resets) > 0 {
			k = append(k, "resets and sets up again "+strings.Join(resets, ", "))
		}
		kubeadm = "kubeadm " + strings.Join(k, "; ")
	}
	return fmt.Sprintf("plan: %s; %s", strings.Join(parts, ", "), kubeadm)
}
