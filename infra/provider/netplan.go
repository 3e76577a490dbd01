package provider

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/nodeprobes"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/keepalived"
	"github.com/homelab-dev/homelab/roles/netplan"
)

// Netplan is a node's static address: homelab's netplan file, validated by
// the node's own netplan before it is put in place, the only definition
// of its interface (other files that configure it are moved aside), and
// applied with netplan try's safety: confirmed over a new SSH connection
// to the declared address, rolled back by the node itself otherwise. The
// seed's first incident was a DHCP lease that moved a control-plane node;
// a file written and never applied or checked would let it happen again.
//
// A node without netplan (Debian's ifupdown) gets the file alone, which
// nothing there reads: its address is the user's to keep static.
type Netplan struct{}

type NetplanArgs struct {
	Connection Connection `pulumi:"connection"`
	// Content is homelab's netplan file (roles/netplan).
	Content string `pulumi:"content"`
	// Interface, MAC and Address (with its prefix length) are what the
	// file declares, which the confirmation checks live.
	Interface string `pulumi:"interface"`
	MAC       string `pulumi:"mac,optional"`
	Address   string `pulumi:"address"`
	// Endpoint is the API's host:port, given on the vip layout's
	// control-plane nodes: the one holding the address hands it over
	// (keepalived stopped) before an apply, as systemd-networkd drops
	// addresses it did not configure.
	Endpoint string `pulumi:"endpoint,optional"`
}

type NetplanState struct {
	NetplanArgs
	// Installed is whether the node has netplan.
	Installed bool `pulumi:"installed"`
	// Sha256 is the live file's checksum ("" when absent).
	Sha256 string `pulumi:"sha256"`
	// Competing are the other files that configure the interface, which
	// the next up moves aside; Unresolved the ones it cannot (they hold
	// other devices too), each with the fix.
	Competing  []string `pulumi:"competing,optional"`
	Unresolved []string `pulumi:"unresolved,optional"`
}

func (n *Netplan) Annotate(a infer.Annotator) {
	a.Describe(&n, "A node's static address: homelab's netplan file, validated on the node, the only definition of its interface, applied with a rollback unless confirmed over a new SSH connection.")
	a.SetToken("index", "Netplan")
}

// netplanRollbackAfter is how long an unconfirmed apply stands before the
// node undoes it (netplan try's default). A variable for the lab's test,
// which waits for it.
var netplanRollbackAfter = 120 * time.Second

// netplanPreviewRead bounds a preview's look at a node it would create
// the file on.
const netplanPreviewRead = 10 * time.Second

// netplanDir holds the staged file, the backup and the rollback script.
const netplanDir = "/var/lib/homelab/netplan"

func (Netplan) Create(ctx context.Context, req infer.CreateRequest[NetplanArgs]) (infer.CreateResponse[NetplanState], error) {
	in := req.Inputs
	id := in.Connection.Node + ":" + netplan.Path
	if req.DryRun {
		// Shown in the preview: what the first up would move aside. A
		// node not racked yet must not hold the preview up.
		rctx, cancel := context.WithTimeout(reading(ctx), netplanPreviewRead)
		defer cancel()
		st, err := readNetplan(rctx, in, NetplanState{NetplanArgs: in})
		if err != nil {
			st = NetplanState{NetplanArgs: in}
		}
		return infer.CreateResponse[NetplanState]{ID: id, Output: planned(st)}, nil
	}
	st, err := convergeNetplan(ctx, in)
	return infer.CreateResponse[NetplanState]{ID: id, Output: st}, err
}

// planned is the state after a converge that went as planned.
func planned(st NetplanState) NetplanState {
	st.Sha256 = sum(st.Content)
	st.Competing = nil
	return st
}

func (Netplan) Read(ctx context.Context, req infer.ReadRequest[NetplanArgs, NetplanState]) (infer.ReadResponse[NetplanArgs, NetplanState], error) {
	ctx = reading(ctx)
	st, err := readNode(ctx, req.State.Connection, req.State, netplanRead, func(c ssh.Executor) (NetplanState, error) {
		return readNetplanWith(ctx, c, req.State)
	})
	if err != nil {
		return infer.ReadResponse[NetplanArgs, NetplanState]{}, err
	}
	return infer.ReadResponse[NetplanArgs, NetplanState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
}

// netplanRead: a node refusing the key reads as not yet written.
var netplanRead = keepOrRecheck(func(st NetplanState) NetplanState {
	st.Sha256 = ""
	return st
})

func readNetplan(ctx context.Context, in NetplanArgs, last NetplanState) (NetplanState, error) {
	c, err := dial(ctx, in.Connection)
	if err != nil {
		return last, err
	}
	defer c.Close()
	return readNetplanWith(ctx, c, last)
}

func readNetplanWith(ctx context.Context, c ssh.Executor, last NetplanState) (NetplanState, error) {
	out, code, err := query(ctx, c, nodeprobes.Netplan(last.Interface))
	if err != nil {
		return last, err
	}
	if code != 0 {
		return last, fmt.Errorf("%s: reading /etc/netplan: exit %d", last.Connection.Node, code)
	}
	st, err := parseNetplanRead(last, out)
	if err != nil {
		return last, fmt.Errorf("%s: reading /etc/netplan: %w", last.Connection.Node, err)
	}
	return st, nil
}

// parseNetplanRead reads netplan/read's answer into st.
func parseNetplanRead(st NetplanState, out string) (NetplanState, error) {
	l, err := netplan.ParseRead(out, netplan.NIC{Name: st.Interface, MAC: st.MAC})
	if err != nil {
		return st, err
	}
	st.Installed, st.Sha256, st.Competing, st.Unresolved = l.Installed, l.Sha256, l.Disable, l.Problems
	return st, nil
}

// netplanChanges is what an up does to the node's netplan, from the
// declared file and the last read.
func netplanChanges(in NetplanArgs, st NetplanState) changeSet {
	d := changeSet{}
	if in.Connection.Node != st.Connection.Node {
		d.replace("connection")
	}
	if sum(in.Content) != st.Sha256 {
		d.update("content")
	}
	if len(st.Competing) > 0 {
		d.update("competing")
	}
	return d
}

func (Netplan) Diff(ctx context.Context, req infer.DiffRequest[NetplanArgs, NetplanState]) (infer.DiffResponse, error) {
	if err := unresolvedNetplan(req.State); err != nil {
		return infer.DiffResponse{}, err
	}
	return netplanChanges(req.Inputs, req.State).diff(true), nil
}

// unresolvedNetplan refuses, before anything changes, a node whose other
// netplan files configure the interface beside other devices.
func unresolvedNetplan(st NetplanState) error {
	if len(st.Unresolved) == 0 {
		return nil
	}
	return fmt.Errorf("%s: another netplan file also configures %s, so a DHCP client (or another address) would run beside the static one:\n  %s",
		st.Connection.Node, st.Interface, strings.Join(st.Unresolved, "\n  "))
}

func (Netplan) Update(ctx context.Context, req infer.UpdateRequest[NetplanArgs, NetplanState]) (infer.UpdateResponse[NetplanState], error) {
	if req.DryRun {
		return infer.UpdateResponse[NetplanState]{Output: planned(NetplanState{NetplanArgs: req.Inputs, Installed: req.State.Installed})}, nil
	}
	st, err := convergeNetplan(ctx, req.Inputs)
	return infer.UpdateResponse[NetplanState]{Output: st}, err
}

// Delete leaves the file: taking a node's static address away would hand
// it back to whatever else configures it, or to nothing.
func (Netplan) Delete(ctx context.Context, req infer.DeleteRequest[NetplanState]) (infer.DeleteResponse, error) {
	return infer.DeleteResponse{}, nil
}

type netplanApplyArgs struct {
	Staged, Path, Backup string
	Disable              []string
	RollbackAfter        int
	DisabledSuffix       string
	CloudInitOff         string
	Restart              string
}

// netplanRollbackArgs are netplan/rollback's.
type netplanRollbackArgs struct {
	Backup, DisabledSuffix, CloudInitOff string
}

// cloudInitOff is the cloud-init setting (in /etc/cloud/cloud.cfg.d) that
// keeps cloud-init from rendering its netplan file again once moved aside.
const cloudInitOff = "99-homelab-network.cfg"

type netplanConfirmArgs struct {
	Interface, Address, Backup string
}

// convergeNetplan reads the node afresh (what it acts on is what is there
// now), then validates, puts in place and applies the file.
func convergeNetplan(ctx context.Context, in NetplanArgs) (NetplanState, error) {
	node := in.Connection.Node
	c, err := dial(ctx, in.Connection)
	if err != nil {
		return NetplanState{NetplanArgs: in}, err
	}
	defer c.Close()
	st, err := readNetplanWith(ctx, c, NetplanState{NetplanArgs: in})
	if err != nil {
		return st, err
	}
	if err := unresolvedNetplan(st); err != nil {
		return st, err
	}
	if !st.Installed {
		if err := c.Upload(ctx, netplan.Path, []byte(in.Content), 0o600); err != nil {
			return st, fmt.Errorf("%s: writing %s: %w", node, netplan.Path, err)
		}
		p.GetLogger(ctx).Warningf("%s: has no netplan, so nothing reads %s: keep its address static the way its system does (nodes[].address)", node, netplan.Path)
		st.Sha256 = sum(in.Content)
		return st, nil
	}
	if sum(in.Content) == st.Sha256 && len(st.Competing) == 0 {
		return st, nil
	}
	var err2 error
	if in.Endpoint == "" {
		_, err2 = applyNetplan(ctx, c, in, st.Competing, "")
	} else {
		// systemd-networkd drops the addresses it did not configure, the
		// VIP among them: keepalived hands it over first.
		err2 = holdingEndpoint(ctx, func() error { return applyHandingVIPOver(ctx, c, in, st.Competing) })
	}
	if err2 != nil {
		return st, err2
	}
	return planned(st), nil
}

// applyHandingVIPOver applies with keepalived stopped when the node holds
// the VIP. Once the apply is armed, starting keepalived again is the
// node's own (the confirmation's or the rollback's): the connection that
// stopped it may be the one the new configuration cuts off, and a VIP
// holder left without keepalived is a control-plane node that no longer
// takes part in serving the endpoint.
func applyHandingVIPOver(ctx context.Context, c ssh.Executor, in NetplanArgs, disable []string) error {
	node := in.Connection.Node
	handedOver, err := handOverVIP(ctx, c, node, in.Endpoint, in.Connection.Host, "its network configuration is applied")
	if err != nil {
		return err
	}
	restart := ""
	if handedOver {
		restart = keepalived.Unit
	}
	armed, err := applyNetplan(ctx, c, in, disable, restart)
	if handedOver && !armed {
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keepalivedBackBound)
		defer cancel()
		if _, serr := must(bctx, c, node, "starting keepalived again", unitScript("start", keepalived.Unit)); serr != nil {
			p.GetLogger(ctx).Warningf("%v: the node takes no part in holding the VIP until keepalived runs again (systemctl start keepalived, or the next up)", serr)
		}
	}
	return err
}

// applyNetplan stages the file, has the node validate, place and apply
// it with a rollback armed, and confirms over a new connection. restart
// is a unit stopped for the apply, which the node starts again when the
// apply ends either way. armed reports whether the node took the apply
// over (from then on, it ends the apply itself).
func applyNetplan(ctx context.Context, c ssh.Executor, in NetplanArgs, disable []string, restart string) (armed bool, err error) {
	node := in.Connection.Node
	staged, backup := netplanDir+"/staged.yaml", netplanDir+"/backup"
	if err := c.Upload(ctx, staged, []byte(in.Content), 0o600); err != nil {
		return false, fmt.Errorf("%s: staging %s: %w", node, netplan.Path, err)
	}
	rollback := scripts.Render("netplan/rollback", netplanRollbackArgs{Backup: backup, DisabledSuffix: netplan.DisabledSuffix, CloudInitOff: cloudInitOff})
	if err := c.Upload(ctx, backup+"/rollback.sh", []byte(rollback.String()), 0o700); err != nil {
		return false, fmt.Errorf("%s: writing the netplan rollback: %w", node, err)
	}
	sort.Strings(disable)
	r, err := c.Run(ctx, scripts.Render("netplan/apply", netplanApplyArgs{
		Staged: staged, Path: netplan.Path, Backup: backup, Disable: disable,
		RollbackAfter: int(netplanRollbackAfter.Seconds()), DisabledSuffix: netplan.DisabledSuffix, CloudInitOff: cloudInitOff,
		Restart: restart,
	}).String())
	if err != nil {
		// Whether the node armed it is unknown: starting restart here too
		// is harmless (the rollback's start, if armed, is idempotent).
		return false, fmt.Errorf("%s: applying %s: %w", node, netplan.Path, err)
	}
	if r.ExitCode == 3 {
		return false, fmt.Errorf("%s: %s refused by the node's netplan, so nothing changed there; check nodes[].interface, nodes[].mac and cluster.network (gateway, nameservers):\n%s",
			node, netplan.Path, tail(strings.TrimSpace(string(r.Stderr)), 20))
	}
	if r.ExitCode != 0 {
		return false, fmt.Errorf("%s: applying %s failed (exit %d):\n%s", node, netplan.Path, r.ExitCode, tail(string(r.Stdout)+string(r.Stderr), 20))
	}
	// Over the old connection, which the new configuration may break
	// (then there is nothing to wait for here): the confirmation's new
	// connection must meet the configuration applied, not the one before.
	_, _, _ = query(ctx, c, scripts.Render("netplan/applied", nil))
	if len(disable) > 0 {
		p.GetLogger(ctx).Infof("%s: moved aside (renamed *%s) what also configured %s: %s", node, netplan.DisabledSuffix, in.Interface, strings.Join(disable, ", "))
	}
	return true, confirmNetplan(ctx, in, backup)
}

// netplanConfirmWithin bounds reaching the node again after an apply:
// half the rollback's time, so a confirmation never races the rollback.
func netplanConfirmWithin() time.Duration { return netplanRollbackAfter / 2 }

// confirmNetplan dials the node anew at its declared address, which only
// answers if the applied configuration kept it reachable, and has it
// check the applied state and disarm the rollback.
func confirmNetplan(ctx context.Context, in NetplanArgs, backup string) error {
	node := in.Connection.Node
	cctx, cancel := context.WithTimeout(ctx, netplanConfirmWithin())
	defer cancel()
	var (
		out     string
		lastErr error
	)
	for {
		c, err := dial(fresh(cctx), in.Connection)
		if err == nil {
			var r ssh.Result
			r, err = c.Run(cctx, scripts.Render("netplan/confirm", netplanConfirmArgs{Interface: in.Interface, Address: in.Address, Backup: backup}).String())
			c.Close()
			if err == nil && r.ExitCode != 0 {
				err = fmt.Errorf("netplan/confirm exit %d: %s", r.ExitCode, tail(string(r.Stderr), 5))
			}
			if err == nil {
				out = string(r.Stdout)
				break
			}
		}
		lastErr = err
		select {
		case <-cctx.Done():
			return fmt.Errorf("%s: not reachable at %s after its new network configuration was applied (%v); the node restores its previous one by itself within %s of the apply",
				node, in.Connection.Host, lastErr, netplanRollbackAfter)
		case <-time.After(2 * time.Second):
		}
	}
	out = strings.TrimSpace(out)
	if why, ok := strings.CutPrefix(out, "refused: "); ok {
		return fmt.Errorf("%s: the applied network configuration was rolled back: %s", node, why)
	}
	if out != "confirmed" {
		return fmt.Errorf("%s: confirming the network configuration: unexpected answer %q; the node restores its previous one within %s of the apply", node, out, netplanRollbackAfter)
	}
	return nil
}
