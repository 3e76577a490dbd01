package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/nodeprobes"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// An expired control plane revives over SSH alone. Renewing one node at a
// time (ControlPlaneAddress) keeps the API served while each node's new
// certificates are checked, and waits for that node's etcd member before
// the next: once the peer certificates of a majority of members expired,
// no member reaches another, etcd has no quorum, and the first node would
// wait for a leader that cannot be elected. With nothing left to keep
// serving there is nothing to wait for either: every control-plane node
// is renewed first, then health is waited for. Nothing of it needs the
// API, which cannot be reached; everything that does comes after it.

// ControlPlaneRevival is the control plane's certificates as a whole:
// read on every control-plane node, and renewed on all of them at once
// when their expiry left nothing serving.
type ControlPlaneRevival struct{}

type ControlPlaneRevivalArgs struct {
	// Nodes are every control-plane node's connection; its host is the
	// node's declared address, at which its apiserver must answer /readyz
	// with a certificate valid for it. Which nodes is a means, not desired
	// state: a node more or less is no change here. A list of
	// connections, as Dataplane's: a connection nested one object deeper
	// reached the state with its key in plain text.
	Nodes []Connection `pulumi:"nodes"`
	// ConfigPath is the nodes' kubeadm init config, from which the
	// certificates are issued again (the inventory's SANs and validity).
	ConfigPath  string `pulumi:"configPath"`
	Port        int    `pulumi:"port"`
	RenewBefore string `pulumi:"renewBefore,optional"`
	// Endpoint is the controlPlaneEndpoint (host:port), through which the
	// API must answer again.
	Endpoint string `pulumi:"endpoint"`
}

type ControlPlaneRevivalState struct {
	ControlPlaneRevivalArgs
	// LiveExpiry is each node's renewable certificates' NotAfter (RFC
	// 3339), by node, then by nodefacts.Renewable name. A node never read
	// has none.
	LiveExpiry map[string]map[string]string `pulumi:"liveExpiry,optional"`
}

func (r *ControlPlaneRevival) Annotate(a infer.Annotator) {
	a.Describe(&r, "The control plane's certificates on every control-plane node: when their expiry left nothing serving (etcd without quorum, or no apiserver that can serve), every node's due certificates are renewed over SSH, its control plane restarted, and only then etcd's quorum and /readyz waited for.")
	a.SetToken("index", "ControlPlaneRevival")
}

// nodeCerts is one control-plane node's certificates as last read.
type nodeCerts struct {
	Node string
	// Expiry is each renewable certificate's NotAfter, by name; nil when
	// the node could not be read.
	Expiry map[string]time.Time
}

// expiredOf lists the node's certificates of that outage that expired.
func (n nodeCerts) expiredOf(now time.Time, o nodefacts.Outage) []string {
	var out []string
	for _, r := range nodefacts.Renewables {
		if at, ok := n.Expiry[r.Name()]; ok && r.Outage == o && !at.After(now) {
			out = append(out, r.Name())
		}
	}
	return out
}

// has reports whether every certificate of that outage was read on the
// node (a node not read, or not joined yet, has none).
func (n nodeCerts) has(o nodefacts.Outage) bool {
	for _, r := range nodefacts.Renewables {
		if _, ok := n.Expiry[r.Name()]; r.Outage == o && !ok {
			return false
		}
	}
	return true
}

// votes: its etcd member can take part in quorum.
func (n nodeCerts) votes(now time.Time) bool {
	return n.has(nodefacts.PeerOutage) && len(n.expiredOf(now, nodefacts.PeerOutage)) == 0
}

// serves: its apiserver's own certificates allow it to serve.
func (n nodeCerts) serves(now time.Time) bool {
	return n.has(nodefacts.APIOutage) && len(n.expiredOf(now, nodefacts.APIOutage)) == 0
}

// revival is what bringing an expired control plane back takes.
type revival struct {
	// Why says what the expired certificates took down.
	Why string
	// Nodes are renewed together, in the inventory's order, each with
	// every certificate due on it.
	Nodes []revivedNode
}

type revivedNode struct {
	Node string
	Due  []renewal
}

// revivalOf decides, from every control-plane node's certificates,
// whether the control plane must be revived rather than renewed one node
// at a time: when expired certificates leave nothing serving, because
// fewer members than a quorum of the control-plane nodes can vote, or no
// voting node's apiserver can serve. A node that could not be read counts
// as neither (what it does is unknown, and the nodes renewed are only the
// ones read). A control plane that is down for another reason (not built
// yet) is no revival's business. Every node read with a certificate due is
// revived: with nothing serving there is nothing to keep up, and a node
// left due would expire right after.
func revivalOf(nodes []nodeCerts, now time.Time, renewBefore time.Duration) (revival, bool) {
	quorum := len(nodes)/2 + 1
	var voters int
	var serving bool
	var peerExpired, apiExpired []string
	for _, n := range nodes {
		if e := n.expiredOf(now, nodefacts.PeerOutage); len(e) > 0 {
			peerExpired = append(peerExpired, n.Node)
		}
		if !n.votes(now) {
			continue
		}
		voters++
		serving = serving || n.serves(now)
		if e := n.expiredOf(now, nodefacts.APIOutage); len(e) > 0 {
			apiExpired = append(apiExpired, n.Node+"'s "+strings.Join(e, ", "))
		}
	}
	var why string
	switch {
	case voters < quorum && len(peerExpired) > 0:
		why = fmt.Sprintf("etcd has no quorum: %d of %d control-plane nodes' members can vote, %d must; the peer certificates of %s expired",
			voters, len(nodes), quorum, strings.Join(peerExpired, ", "))
	case voters >= quorum && !serving && len(apiExpired) > 0:
		why = "no apiserver can serve: " + strings.Join(apiExpired, "; ") + " expired"
	default:
		// Serving, or down for a reason no renewal fixes.
		return revival{}, false
	}
	rv := revival{Why: why}
	for _, n := range nodes {
		if due := renewalsDue(n.Expiry, now, renewBefore); len(due) > 0 {
			rv.Nodes = append(rv.Nodes, revivedNode{n.Node, due})
		}
	}
	return rv, true
}

func (rv revival) names() []string {
	var out []string
	for _, n := range rv.Nodes {
		out = append(out, n.Node)
	}
	return out
}

// revivalKey is the detailed diff's path of a certificate a revival
// renews, into the state's liveExpiry: the preview names the node and the
// certificate, and its old value is its date.
func revivalKey(node, name string) string { return `liveExpiry["` + node + `"]["` + name + `"]` }

// addressArgs is one node as the renewal steps it shares with
// ControlPlaneAddress take it.
func (in ControlPlaneRevivalArgs) addressArgs(n Connection) ControlPlaneAddressArgs {
	return ControlPlaneAddressArgs{Connection: n, Address: n.Host, ConfigPath: in.ConfigPath, Port: in.Port, RenewBefore: in.RenewBefore, Endpoint: in.Endpoint}
}

func (in ControlPlaneRevivalArgs) renewBefore() time.Duration {
	return ControlPlaneAddressArgs{RenewBefore: in.RenewBefore}.renewBefore()
}

// certsOf is the state's reading of every declared node, in their order.
func certsOf(in ControlPlaneRevivalArgs, st ControlPlaneRevivalState) []nodeCerts {
	var out []nodeCerts
	for _, n := range in.Nodes {
		nc := nodeCerts{Node: n.Node}
		if live, ok := st.LiveExpiry[nc.Node]; ok {
			nc.Expiry = expiryTimes(live)
		}
		out = append(out, nc)
	}
	return out
}

// revivalChanges is the revival the last read calls for, keyed by the
// certificates it renews.
func revivalChanges(in ControlPlaneRevivalArgs, st ControlPlaneRevivalState, now time.Time) (changeSet, revival) {
	d := changeSet{}
	rv, ok := revivalOf(certsOf(in, st), now, in.renewBefore())
	if !ok {
		return d, rv
	}
	for _, n := range rv.Nodes {
		for _, r := range n.Due {
			d.update(revivalKey(n.Node, r.Name))
		}
	}
	return d, rv
}

// revivalRead keeps a node's last known dates whatever kept it from being
// read: an unread node counts as unknown in the decision only when it was
// never read, and Update reads every node itself before it acts.
var revivalRead = keepLastState[map[string]string]()

func (ControlPlaneRevival) Read(ctx context.Context, req infer.ReadRequest[ControlPlaneRevivalArgs, ControlPlaneRevivalState]) (infer.ReadResponse[ControlPlaneRevivalArgs, ControlPlaneRevivalState], error) {
	ctx = reading(ctx)
	st := req.State
	// The latest inputs' nodes: which nodes is no change (Diff ignores
	// it), so the state may hold an older list.
	nodes := req.Inputs.Nodes
	if len(nodes) == 0 {
		nodes = st.Nodes
	}
	type expiryRead struct {
		exp map[string]string
		err error
	}
	read := eachNode(nodes, func(n Connection) expiryRead {
		exp, err := readNode(ctx, n, st.LiveExpiry[n.Node], revivalRead, expiryOn(ctx))
		return expiryRead{exp, err}
	})
	live := map[string]map[string]string{}
	for i, n := range nodes {
		if read[i].err != nil {
			return infer.ReadResponse[ControlPlaneRevivalArgs, ControlPlaneRevivalState]{}, read[i].err
		}
		if read[i].exp != nil {
			live[n.Node] = read[i].exp
		}
	}
	st.LiveExpiry = live
	return infer.ReadResponse[ControlPlaneRevivalArgs, ControlPlaneRevivalState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
}

// expiryOn reads a node's renewable certificates' dates, as the state
// keeps them.
func expiryOn(ctx context.Context) func(c ssh.Executor) (map[string]string, error) {
	return func(c ssh.Executor) (map[string]string, error) {
		out, _, err := query(ctx, c, nodeprobes.Expiry())
		if err != nil {
			return nil, err
		}
		return liveExpiryOf(nodefacts.ParseExpiry(out)), nil
	}
}

func (ControlPlaneRevival) Diff(ctx context.Context, req infer.DiffRequest[ControlPlaneRevivalArgs, ControlPlaneRevivalState]) (infer.DiffResponse, error) {
	d, rv := revivalChanges(req.Inputs, req.State, time.Now())
	if len(d) > 0 {
		p.GetLogger(ctx).Warningf("the control plane's certificates expired: %s. up revives it over SSH: renews every certificate due on %s, restarts their kubelet, apiserver, controller-manager and scheduler, then waits for etcd's quorum and /readyz through %s",
			rv.Why, strings.Join(rv.names(), ", "), req.Inputs.Endpoint)
	}
	return d.diff(false), nil
}

func (ControlPlaneRevival) Create(ctx context.Context, req infer.CreateRequest[ControlPlaneRevivalArgs]) (infer.CreateResponse[ControlPlaneRevivalState], error) {
	st := ControlPlaneRevivalState{ControlPlaneRevivalArgs: req.Inputs}
	if req.DryRun {
		// New to a stack whose control plane may have expired already:
		// the preview says so, from a look at the nodes (read-only; a
		// node that cannot be read, as on a first build, says nothing).
		seen := ControlPlaneRevivalState{ControlPlaneRevivalArgs: req.Inputs, LiveExpiry: map[string]map[string]string{}}
		for _, n := range req.Inputs.Nodes {
			if exp, err, _ := readOnce(ctx, n, expiryOn(ctx)); err == nil {
				seen.LiveExpiry[n.Node] = exp
			}
		}
		_, _ = ControlPlaneRevival{}.Diff(ctx, infer.DiffRequest[ControlPlaneRevivalArgs, ControlPlaneRevivalState]{ID: "control-plane", Inputs: req.Inputs, State: seen})
		return infer.CreateResponse[ControlPlaneRevivalState]{ID: "control-plane", Output: st}, nil
	}
	st, err := revive(ctx, req.Inputs, nil)
	return infer.CreateResponse[ControlPlaneRevivalState]{ID: "control-plane", Output: st}, err
}

func (ControlPlaneRevival) Update(ctx context.Context, req infer.UpdateRequest[ControlPlaneRevivalArgs, ControlPlaneRevivalState]) (infer.UpdateResponse[ControlPlaneRevivalState], error) {
	st := req.State
	st.ControlPlaneRevivalArgs = req.Inputs
	if req.DryRun {
		return infer.UpdateResponse[ControlPlaneRevivalState]{Output: st}, nil
	}
	st, err := revive(ctx, req.Inputs, &req.State)
	return infer.UpdateResponse[ControlPlaneRevivalState]{Output: st}, err
}

// Delete changes nothing: the certificates are the nodes'.
func (ControlPlaneRevival) Delete(ctx context.Context, req infer.DeleteRequest[ControlPlaneRevivalState]) (infer.DeleteResponse, error) {
	return infer.DeleteResponse{}, nil
}

// revivalPods are restarted on a revived node once every node has its
// certificates: the controller-manager and the scheduler read their
// kubeconfigs only when they start, and the apiserver, which reloads its
// certificates by itself, has by now failed its liveness probe long enough
// to be in the kubelet's crash-loop back-off or its etcd client in gRPC's
// reconnect back-off (minutes either), which a restart ends. The kubelet
// is restarted first, which resets its back-off. etcd is not: it reads its
// certificates at each handshake (waitHealthy restarts it, once, should it
// still serve an old one).
var revivalPods = []string{nodefacts.KubeAPIServer, nodefacts.KubeControllerManager, nodefacts.KubeScheduler}

func reviveRestart() scripts.Script {
	return scripts.Render("revival/restart", restartArgsOf(revivalPods))
}

// revive reads every control-plane node and, when revivalOf says so,
// renews every due certificate on every node it names, then restarts
// their control planes, then waits for each: etcd's member with a
// leader, the served certificates the new files, /readyz on the node and
// through the endpoint, the restarted components' health. A node that
// does not answer is left out, with a warning (a majority renewed is a
// quorum again; it is renewed one at a time by its ControlPlaneAddress
// once it answers).
func revive(ctx context.Context, in ControlPlaneRevivalArgs, last *ControlPlaneRevivalState) (ControlPlaneRevivalState, error) {
	st := ControlPlaneRevivalState{ControlPlaneRevivalArgs: in, LiveExpiry: map[string]map[string]string{}}
	log := p.GetLogger(ctx)
	conns := map[string]ssh.Executor{}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	before := map[string][]nodefacts.Expiry{}
	var certs []nodeCerts
	for _, n := range in.Nodes {
		node := n.Node
		c, err := dial(ctx, n)
		if err != nil {
			logUnread(ctx, node, err, "the revival leaves it out")
			if last != nil && last.LiveExpiry[node] != nil {
				st.LiveExpiry[node] = last.LiveExpiry[node]
			}
			certs = append(certs, nodeCerts{Node: node})
			continue
		}
		conns[node] = c
		out, _, err := query(ctx, c, nodeprobes.Expiry())
		if err != nil {
			return st, fmt.Errorf("%s: reading its certificates: %w", node, err)
		}
		before[node] = nodefacts.ParseExpiry(out)
		st.LiveExpiry[node] = liveExpiryOf(before[node])
		certs = append(certs, nodeCerts{Node: node, Expiry: expiryTimes(st.LiveExpiry[node])})
	}
	rv, ok := revivalOf(certs, time.Now(), in.renewBefore())
	if !ok {
		return st, nil
	}
	log.Warningf("the control plane's certificates expired: %s; reviving %s over SSH", rv.Why, strings.Join(rv.names(), ", "))
	byNode := map[string]Connection{}
	for _, n := range in.Nodes {
		byNode[n.Node] = n
	}
	// Every node's certificates before any health is waited for: no
	// member can be healthy before a quorum of them has its own.
	for _, rn := range rv.Nodes {
		files, kubeconfigs, _ := renewedCerts(rn.Due)
		for _, r := range rn.Due {
			log.Infof("%s: renewing %s", rn.Node, r)
		}
		if err := issueAgain(ctx, conns[rn.Node], rn.Node, in.addressArgs(byNode[rn.Node]).configPath(), files, kubeconfigs); err != nil {
			return st, err
		}
	}
	// Each renewed certificate must be a new one before anything waits for
	// it: kubeadm exits 0 and renews nothing when the CA's key is not on
	// the node (an external CA), and no quorum would ever come.
	var left []string
	for _, rn := range rv.Nodes {
		out, _, err := query(ctx, conns[rn.Node], nodeprobes.Expiry())
		if err != nil {
			return st, fmt.Errorf("%s: reading its certificates: %w", rn.Node, err)
		}
		after := nodefacts.ParseExpiry(out)
		st.LiveExpiry[rn.Node] = liveExpiryOf(after)
		for _, problem := range notRenewed(rn.Due, before[rn.Node], after, time.Now(), in.renewBefore()) {
			left = append(left, rn.Node+": "+problem)
		}
	}
	if len(left) > 0 {
		return st, fmt.Errorf("the revival did not renew everything, so nothing was restarted: %s", strings.Join(left, "; "))
	}
	for _, rn := range rv.Nodes {
		if _, err := mustFinish(ctx, conns[rn.Node], rn.Node, "restarting the kubelet, "+strings.Join(revivalPods, ", "), reviveRestart()); err != nil {
			return st, err
		}
	}
	for _, rn := range rv.Nodes {
		c, a := conns[rn.Node], in.addressArgs(byNode[rn.Node])
		files, _, _ := renewedCerts(rn.Due)
		s := settle{served: servedOf(files, a.port()), components: []string{nodefacts.KubeControllerManager, nodefacts.KubeScheduler}, endpoint: in.Endpoint != ""}
		if err := waitHealthy(ctx, c, a, s); err != nil {
			return st, fmt.Errorf("%s: after the revival: %w", rn.Node, err)
		}
	}
	log.Infof("the control plane is back: %s renewed, etcd has a leader, the API answers through %s", strings.Join(rv.names(), ", "), in.Endpoint)
	for _, n := range certs {
		if n.Expiry == nil {
			log.Warningf("%s was not revived (it did not answer): its ControlPlaneAddress renews it once it does", n.Node)
		}
	}
	return st, nil
}
