package provider

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"path"
	"slices"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/nodeprobes"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/kubeadm"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// ControlPlaneAddress keeps what kubeadm baked into a control-plane node
// at init or join in step with the inventory: the address its etcd and
// apiserver bind and advertise, the kubeconfigs its own components use, the
// kubelet's node IP, and the SANs of its apiserver and etcd certificates.
// kubeadm does not follow an address change (kubeadm #3299) and `kubeadm
// certs renew` keeps the old SANs (kubeadm #1447): this resource compares
// the live certificates' SANs with the required set and regenerates those
// that differ, whether or not the files exist. It renews the node's
// certificates before they expire the same way (renewal.go), since both
// re-issue certificates on one node while the others serve.
type ControlPlaneAddress struct{}

type ControlPlaneAddressArgs struct {
	Connection Connection `pulumi:"connection"`
	Address    string     `pulumi:"address"`
	// APIServerSANs and EtcdSANs are the required sets (roles/sans).
	APIServerSANs []string `pulumi:"apiServerSANs"`
	EtcdSANs      []string `pulumi:"etcdSANs"`
	// ConfigPath is the node's kubeadm init config (an InitConfiguration +
	// ClusterConfiguration every control-plane node has), which the init
	// phases that regenerate its certificates and manifests read.
	ConfigPath string `pulumi:"configPath,optional"`
	// Config is no longer used; stacks made by earlier versions hold it.
	Config string `pulumi:"config,optional" provider:"secret"`
	Port   int    `pulumi:"port"`
	// ComponentArgs are the flags (name=value) each control-plane
	// component's static pod must run with, by pod name (kube-apiserver).
	ComponentArgs map[string][]string `pulumi:"componentArgs,optional"`
	// RenewBefore is how long before its expiry a certificate is renewed
	// (a Go duration; the inventory's cluster.certificates.renewBefore).
	RenewBefore string `pulumi:"renewBefore,optional"`
	// Endpoint is the controlPlaneEndpoint (host:port), through which the
	// API must still answer once the node's certificates are renewed.
	Endpoint string `pulumi:"endpoint,optional"`
}

type ControlPlaneAddressState struct {
	ControlPlaneAddressArgs
	// What the node has: the apiserver's advertise address, the address
	// etcd listens on for peers, the kubelet's node IP, the kubeconfig
	// servers and each certificate's SANs.
	LiveAdvertise  string            `pulumi:"liveAdvertise"`
	LiveEtcdPeer   string            `pulumi:"liveEtcdPeer"`
	LiveNodeIP     string            `pulumi:"liveNodeIP"`
	LiveKubeconfig map[string]string `pulumi:"liveKubeconfig,optional"`
	LiveSANs       map[string]string `pulumi:"liveSANs,optional"`
	// LiveArgs are the declared flags' live values, keyed pod/flag; a flag
	// the manifest lacks is absent.
	LiveArgs map[string]string `pulumi:"liveArgs,optional"`
	// LiveExpiry is each renewable certificate's NotAfter (RFC 3339), by
	// nodefacts.Renewable name.
	LiveExpiry map[string]string `pulumi:"liveExpiry,optional"`
}

func (c *ControlPlaneAddress) Annotate(a infer.Annotator) {
	a.Describe(&c, "A control-plane node's address as kubeadm baked it in (manifests, kubeconfigs, node IP) and its certificates' SANs, kept equal to the inventory, and its certificates renewed before they expire.")
	a.SetToken("index", "ControlPlaneAddress")
}

func (in ControlPlaneAddressArgs) configPath() string {
	if in.ConfigPath == "" {
		return kubeadm.InitConfigPath
	}
	return in.ConfigPath
}

// liveScript reads the node's configuration and its certificates' dates
// in one round trip: each parser skips the other's lines.
var liveScript = nodeprobes.Live()

// readLive records what the node has in st, and returns the
// certificates' expiries as read.
func readLive(ctx context.Context, c ssh.Executor, st *ControlPlaneAddressState) ([]nodefacts.Expiry, error) {
	out, _, err := query(ctx, c, liveScript)
	if err != nil {
		return nil, err
	}
	setLive(st, nodefacts.ParseProbe(out))
	exp := nodefacts.ParseExpiry(out)
	st.LiveExpiry = liveExpiryOf(exp)
	return exp, nil
}

// setLive records what the node's files say, as the state keeps it.
func setLive(st *ControlPlaneAddressState, live nodefacts.Live) {
	st.LiveAdvertise, st.LiveEtcdPeer, st.LiveNodeIP = "", "", ""
	st.LiveKubeconfig, st.LiveSANs, st.LiveArgs = map[string]string{}, map[string]string{}, map[string]string{}
	if f, ok := live.Flags(nodefacts.KubeAPIServer); ok {
		st.LiveAdvertise = f["advertise-address"]
	}
	if f, ok := live.Flags(nodefacts.Etcd); ok && f["listen-peer-urls"] != "" {
		st.LiveEtcdPeer = hostOf(strings.Split(f["listen-peer-urls"], ",")[0])
	}
	st.LiveNodeIP = live.KubeletFlags()["node-ip"]
	for _, kc := range nodefacts.OwnKubeconfigs {
		if server, ok := live.Kubeconfigs[kc]; ok {
			st.LiveKubeconfig[path.Base(kc)] = hostOf(server)
		}
	}
	for pod := range st.ComponentArgs {
		flags, ok := live.Flags(pod)
		if !ok {
			continue // a node not joined yet: its join writes the manifests
		}
		for flag, v := range flags {
			st.LiveArgs[pod+"/"+flag] = v
		}
	}
	for _, sc := range nodefacts.ServingCerts {
		st.LiveSANs[sc.File] = ""
		if cert, ok := live.Cert(sc.File); ok {
			st.LiveSANs[sc.File] = strings.Join(slices.Sorted(slices.Values(nodefacts.SANs(cert))), ",")
		}
	}
}

func hostOf(u string) string {
	u = strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "http://")
	if h, _, err := net.SplitHostPort(u); err == nil {
		return h
	}
	return u
}

// drift lists what differs on the node, by what fixes it.
type drift struct {
	certs    []string // certificate files to regenerate
	address  bool     // manifests, kubeconfigs and node IP carry another address
	pods     []string // static pods whose flags differ from the cluster config
	problems []string
}

func driftOf(in ControlPlaneAddressArgs, st ControlPlaneAddressState) drift {
	var d drift
	byFile := func(a, b nodefacts.ServingCert) int { return strings.Compare(a.File, b.File) }
	for _, sc := range slices.SortedFunc(slices.Values(nodefacts.ServingCerts), byFile) {
		want := in.APIServerSANs
		if sc.Etcd {
			want = in.EtcdSANs
		}
		have := []string{}
		if live := st.LiveSANs[sc.File]; live != "" {
			have = strings.Split(live, ",")
		}
		if nodefacts.SANsDiffer(have, want, sc.AllowedExtras()) {
			d.certs = append(d.certs, sc.File)
			d.problems = append(d.problems, sc.File+" SANs differ from the required set")
		}
	}
	for _, pod := range slices.Sorted(maps.Keys(in.ComponentArgs)) {
		if _, ok := nodefacts.ComponentPhase[pod]; !ok {
			continue
		}
		if !hasPod(st.LiveArgs, pod) {
			continue // no manifest yet: the join writes it
		}
		for _, arg := range in.ComponentArgs[pod] {
			name, want, _ := strings.Cut(arg, "=")
			if got, ok := st.LiveArgs[pod+"/"+name]; !ok || got != want {
				d.pods = append(d.pods, pod)
				d.problems = append(d.problems, fmt.Sprintf("%s runs without --%s=%s", pod, name, want))
				break
			}
		}
	}
	if st.LiveAdvertise != "" && st.LiveAdvertise != in.Address {
		d.address = true
		d.problems = append(d.problems, "kube-apiserver advertises "+st.LiveAdvertise)
	}
	if st.LiveEtcdPeer != "" && st.LiveEtcdPeer != in.Address {
		d.address = true
		d.problems = append(d.problems, "etcd listens on "+st.LiveEtcdPeer)
	}
	if st.LiveNodeIP != "" && st.LiveNodeIP != in.Address {
		d.address = true
		d.problems = append(d.problems, "the kubelet's node IP is "+st.LiveNodeIP)
	}
	for f, h := range st.LiveKubeconfig {
		if h != in.Address && isIP(h) && slices.Contains(nodefacts.OwnKubeconfigs, nodefacts.KubernetesDir+"/"+f) && (h == st.LiveAdvertise || h == st.LiveNodeIP) {
			d.address = true
			d.problems = append(d.problems, f+" points at "+h)
		}
	}
	return d
}

// hasPod reports whether any live flag of pod was read (its manifest exists).
func hasPod(live map[string]string, pod string) bool {
	for k := range live {
		if strings.HasPrefix(k, pod+"/") {
			return true
		}
	}
	return false
}

func isIP(s string) bool { _, err := netip.ParseAddr(s); return err == nil }

func (ControlPlaneAddress) Create(ctx context.Context, req infer.CreateRequest[ControlPlaneAddressArgs]) (infer.CreateResponse[ControlPlaneAddressState], error) {
	in := req.Inputs
	st := ControlPlaneAddressState{ControlPlaneAddressArgs: in}
	if req.DryRun {
		return infer.CreateResponse[ControlPlaneAddressState]{ID: in.Connection.Node, Output: st}, nil
	}
	st, err := convergeAddress(ctx, in, nil, renewalAsked(ctx, in.Connection.Node))
	return infer.CreateResponse[ControlPlaneAddressState]{ID: in.Connection.Node, Output: st}, err
}

// addressRead keeps the last known state whatever kept the node from
// being read, a refused key included. A new key in the inventory is a
// connection change to addressChanges already, and Update (convergeAddress)
// reads the node itself before it fixes anything; an unknown state would
// only make every certificate's SANs look wrong in the preview. A machine
// rebuilt under old state shows in the node's KubeadmJoin.
var addressRead = keepLastState[ControlPlaneAddressState]()

func (ControlPlaneAddress) Read(ctx context.Context, req infer.ReadRequest[ControlPlaneAddressArgs, ControlPlaneAddressState]) (infer.ReadResponse[ControlPlaneAddressArgs, ControlPlaneAddressState], error) {
	ctx = reading(ctx)
	st, err := readNode(ctx, req.State.Connection, req.State, addressRead, func(c ssh.Executor) (ControlPlaneAddressState, error) {
		st := req.State
		_, err := readLive(ctx, c, &st)
		return st, err
	})
	if err != nil {
		return infer.ReadResponse[ControlPlaneAddressArgs, ControlPlaneAddressState]{}, err
	}
	return infer.ReadResponse[ControlPlaneAddressArgs, ControlPlaneAddressState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
}

// addressChanges compares the inventory with what the node has, not with
// the last inputs: the point is drift kubeadm left behind, and
// certificates about to expire (due, from renewalsOf). Update fixes
// whatever driftOf and renewalsOf find when it runs, reading the node
// again first.
func addressChanges(in ControlPlaneAddressArgs, st ControlPlaneAddressState, due []renewal) changeSet {
	d := changeSet{}
	for _, r := range due {
		d.update(expiryKey(r.Name))
	}
	dr := driftOf(in, st)
	if in.Address != st.Address || dr.address {
		d.update("address")
	}
	if len(dr.certs) > 0 || !slices.Equal(in.APIServerSANs, st.APIServerSANs) || !slices.Equal(in.EtcdSANs, st.EtcdSANs) {
		d.update("sans")
	}
	if len(dr.pods) > 0 {
		d.update("componentArgs")
	}
	if in.Connection != st.Connection {
		d.update("connection")
	}
	return d
}

func (ControlPlaneAddress) Diff(ctx context.Context, req infer.DiffRequest[ControlPlaneAddressArgs, ControlPlaneAddressState]) (infer.DiffResponse, error) {
	node := req.Inputs.Connection.Node
	due := renewalsOf(req.Inputs, req.State, time.Now(), renewalAsked(ctx, node))
	for _, r := range due {
		p.GetLogger(ctx).Infof("%s: renews %s", node, r)
	}
	d := addressChanges(req.Inputs, req.State, due)
	if renewalAsked(ctx, node) && len(req.State.LiveExpiry) == 0 {
		// Asked for, and no date read yet (a stack made before they were
		// read): Update reads them and renews all.
		d.update("liveExpiry")
	}
	return d.diff(false), nil
}

func (ControlPlaneAddress) Update(ctx context.Context, req infer.UpdateRequest[ControlPlaneAddressArgs, ControlPlaneAddressState]) (infer.UpdateResponse[ControlPlaneAddressState], error) {
	st := req.State
	st.ControlPlaneAddressArgs = req.Inputs
	if req.DryRun {
		return infer.UpdateResponse[ControlPlaneAddressState]{Output: st}, nil
	}
	st, err := convergeAddress(ctx, req.Inputs, &req.State, renewalAsked(ctx, req.Inputs.Connection.Node))
	return infer.UpdateResponse[ControlPlaneAddressState]{Output: st}, err
}

// Delete changes nothing: the node's reset belongs to its init or join.
func (ControlPlaneAddress) Delete(ctx context.Context, req infer.DeleteRequest[ControlPlaneAddressState]) (infer.DeleteResponse, error) {
	return infer.DeleteResponse{}, nil
}

// convergeAddress reads the node and fixes what differs, and renews its
// certificates that are due (all of them when asked). The node's etcd
// member must already carry the new peer URL (EtcdMembers runs first):
// otherwise the restarted member could not be reached by its peers and
// would never become healthy. It returns once this node's etcd and
// apiserver are healthy again, serving the certificates now in their
// files, so the next control-plane node is touched only then and etcd
// never loses more than one member at a time.
//
// last is the state Update starts from (nil for Create). A node that does
// not answer, and whose only changes are renewals, is left for the next
// up with a warning rather than failing this one: the nodes after it are
// renewed meanwhile, and its own certificates stay due in its state.
func convergeAddress(ctx context.Context, in ControlPlaneAddressArgs, last *ControlPlaneAddressState, asked bool) (ControlPlaneAddressState, error) {
	st := ControlPlaneAddressState{ControlPlaneAddressArgs: in}
	node := in.Connection.Node
	c, err := dial(ctx, in.Connection)
	if err != nil {
		if last != nil && failureOf(err) == nodeUnreachable && len(addressChanges(in, *last, nil)) == 0 {
			logUnread(ctx, node, err, "its certificates are not renewed by this up; the next up renews them once it answers")
			kept := *last
			kept.ControlPlaneAddressArgs = in
			return kept, nil
		}
		return st, err
	}
	defer c.Close()
	before, err := readLive(ctx, c, &st)
	if err != nil {
		return st, err
	}
	dr := driftOf(in, st)
	due := renewalsOf(in, st, time.Now(), asked)
	if len(dr.problems) == 0 && len(due) == 0 {
		return st, nil
	}
	log := p.GetLogger(ctx)
	if len(dr.problems) > 0 {
		log.Infof("%s: %s", node, strings.Join(dr.problems, "; "))
	}
	for _, r := range due {
		log.Infof("%s: renewing %s", node, r)
	}
	renewed, kubeconfigs, restart := renewedCerts(due)
	certs := slices.Clone(dr.certs)
	for _, f := range renewed {
		if !slices.Contains(certs, f) {
			certs = append(certs, f)
		}
	}
	fix := func() error {
		if err := issueAgain(ctx, c, node, in.configPath(), certs, kubeconfigs); err != nil {
			return err
		}
		// Flags the cluster config declares and a manifest lacks: kubeadm
		// regenerates the whole manifest from the config (volumes included).
		// The address fix below regenerates the apiserver's itself.
		for _, pod := range dr.pods {
			if pod == "kube-apiserver" && dr.address {
				continue
			}
			if _, err := mustFinish(ctx, c, node, "regenerating "+pod+"'s manifest", regeneratePod(pod, in.configPath())); err != nil {
				return err
			}
		}
		if dr.address {
			old := st.LiveAdvertise
			if old == "" {
				old = st.LiveEtcdPeer
			}
			if old == in.Address {
				old = ""
			}
			if _, err := mustFinish(ctx, c, node, "moving the control plane to "+in.Address, moveScript(in.configPath(), old, in.Address)); err != nil {
				return err
			}
		}
		// A regenerated manifest, or the move, restarted its pod after its
		// kubeconfig was renewed already.
		toRestart := slices.DeleteFunc(slices.Clone(restart), func(pod string) bool { return dr.address || slices.Contains(dr.pods, pod) })
		if len(toRestart) > 0 {
			if _, err := mustFinish(ctx, c, node, "restarting "+strings.Join(toRestart, ", ")+" for their renewed kubeconfigs", restartPods(toRestart)); err != nil {
				return err
			}
		}
		s := settle{served: servedOf(certs, in.port()), components: restart, endpoint: len(due) > 0 && in.Endpoint != ""}
		if err := waitHealthy(ctx, c, in, s); err != nil {
			return fmt.Errorf("%s: %w", node, err)
		}
		return nil
	}
	// The VIP holder's apiserver restarting would leave the endpoint
	// answering nothing until keepalived's check moved the address
	// (fall 2 at 1 s intervals, then VRRP): hand the address over first,
	// as the upgrade does.
	if restartsAPIServer(dr, restart) {
		err = withVIPHandedOver(ctx, c, node, in.Endpoint, in.Address, "its apiserver restarts", fix)
	} else {
		err = fix()
	}
	if err != nil {
		return st, err
	}
	after, err := readLive(ctx, c, &st)
	if err != nil {
		return st, err
	}
	left := driftOf(in, st).problems
	left = append(left, notRenewed(due, before, after, time.Now(), in.renewBefore())...)
	if len(left) > 0 {
		return st, fmt.Errorf("%s: still differs after the fix: %s", node, strings.Join(left, "; "))
	}
	return st, nil
}

// restartsAPIServer says whether fixing dr (and restarting restart's
// pods) restarts the node's apiserver: a move or a regenerated manifest
// does, and so does a renewed certificate it reads only at start.
func restartsAPIServer(dr drift, restart []string) bool {
	return dr.address || slices.Contains(dr.pods, nodefacts.KubeAPIServer) || slices.Contains(restart, nodefacts.KubeAPIServer)
}

func (in ControlPlaneAddressArgs) port() int {
	if in.Port == 0 {
		return 6443
	}
	return in.Port
}

type moveArgs struct {
	Config, Old, New string
	// Kubeconfigs and KubeletFlags are the files that carry the node's
	// address besides its manifests.
	Kubeconfigs  []string
	KubeletFlags string
	// Restart are the processes (pkill -f patterns) that read their
	// kubeconfigs only when they start.
	Restart []string
}

// moveScript moves the node's control plane to address from old, the
// address kubeadm baked in ("" when none differs: the manifests alone
// are written again).
func moveScript(config, old, address string) scripts.Script {
	a := moveArgs{Config: config, Old: old, New: address, Kubeconfigs: nodefacts.OwnKubeconfigs, KubeletFlags: nodefacts.KubeletFlagsEnv}
	for _, pod := range []string{nodefacts.KubeControllerManager, nodefacts.KubeScheduler} {
		a.Restart = append(a.Restart, nodefacts.ProcessPattern(pod))
	}
	return scripts.Render("address/move", a)
}
