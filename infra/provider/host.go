package provider

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/nodeprobes"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/containerd"
	"github.com/homelab-dev/homelab/roles/nodefacts"
	"github.com/homelab-dev/homelab/roles/pki"
)

// Host is a machine of the inventory as it really is: reachable with its
// host key verified, its hostname, addresses, NICs, OS, kernel, installed
// versions and GPUs. It changes nothing on the node; it exists so preview
// shows hardware changes (a new MAC, a new address) and so later steps fail
// early, naming what is missing.
type Host struct{}

type HostArgs struct {
	Connection Connection `pulumi:"connection"`
	// Address and MAC are what the inventory declares.
	Address string `pulumi:"address"`
	MAC     string `pulumi:"mac,optional"`
	// Requires lists commands the node must have (kubeadm, kubelet, ...).
	Requires []string `pulumi:"requires,optional"`
	// ClusterCA is the pin (kubeadm's caCertHashes form) of the secrets
	// bundle's Kubernetes CA: a node holding another CA runs another
	// cluster.
	ClusterCA string `pulumi:"clusterCA,optional"`
	// Runtime is what the container runtime must agree with; nil: not
	// checked.
	Runtime *RuntimeExpect `pulumi:"runtime,optional"`
}

// RuntimeExpect is what the kubelet needs of containerd. A managed
// runtime (up writes its configuration) must be a containerd whose
// configuration format up writes; one the user configures must already
// agree with the kubelet, or pods fail after kubeadm ran.
type RuntimeExpect struct {
	Manage       bool   `pulumi:"manage"`
	CgroupDriver string `pulumi:"cgroupDriver"`
	SandboxImage string `pulumi:"sandboxImage"`
	// KubernetesVersion is the declared one, which the installed
	// containerd must support (containerd.Supports).
	KubernetesVersion string `pulumi:"kubernetesVersion,optional"`
}

type HostState struct {
	HostArgs
	Hostname  string            `pulumi:"hostname"`
	Addresses []string          `pulumi:"addresses,optional"`
	MACs      []string          `pulumi:"macs,optional"`
	OS        string            `pulumi:"os"`
	Kernel    string            `pulumi:"kernel"`
	Versions  map[string]string `pulumi:"versions,optional"`
	// Stamps identify the file each version was read from (versionsAfter).
	Stamps  map[string]string `pulumi:"stamps,optional"`
	GPUs    []string          `pulumi:"gpus,optional"`
	Missing []string          `pulumi:"missing,optional"`
	// HostKey is the fingerprint of the host key seen live; ConvergedHostKey
	// the one seen by the last up. They differ once a replaced machine's
	// new key was accepted, which preview shows as this node's change.
	HostKey          string `pulumi:"hostKey,optional"`
	ConvergedHostKey string `pulumi:"convergedHostKey,optional"`
	// CA is the pin of the Kubernetes CA the node holds, JoinedAs the node
	// name its kubelet's client certificate was issued for ("" for none):
	// who the machine is to a cluster, whatever the inventory calls it.
	CA       string `pulumi:"ca,optional"`
	JoinedAs string `pulumi:"joinedAs,optional"`
	// RuntimeCgroupDriver and RuntimeSandboxImage are what containerd
	// runs with (its config dump), read when the user configures it;
	// RuntimeError why the dump failed; RuntimeDown why containerd did
	// not answer on its socket, when it did not.
	RuntimeCgroupDriver string `pulumi:"runtimeCgroupDriver,optional"`
	RuntimeSandboxImage string `pulumi:"runtimeSandboxImage,optional"`
	RuntimeError        string `pulumi:"runtimeError,optional"`
	RuntimeDown         string `pulumi:"runtimeDown,optional"`
}

func (h *Host) Annotate(a infer.Annotator) {
	a.Describe(&h, "A node's live facts, read over SSH with its host key verified. Changes nothing.")
	a.SetToken("index", "Host")
}

// factsArgs are host/facts' values.
type factsArgs struct {
	CA, KubeletCert, KubeletConf string
	Versions                     versionsArgs
	Requires                     []string
	// RuntimeDump asks for containerd's effective configuration, and
	// whether it answers on RuntimeSocket.
	RuntimeDump   bool
	RuntimeSocket string
}

// factsAt reads the CA, the kubelet's client certificate and kubelet.conf
// at those paths (tests' temporary files); nodeFacts, at the node's.
func factsAt(ca, kubeletCert, kubeletConf string) factsArgs {
	return factsArgs{CA: ca, KubeletCert: kubeletCert, KubeletConf: kubeletConf}
}

var nodeFacts = factsAt(pki.CertificatesDir+"/ca.crt", nodefacts.KubeletClientCert, nodefacts.KubeletConf)

func (a factsArgs) Script() scripts.Script { return scripts.Render("host/facts", a) }

// versionTools are the tools whose versions a node's facts hold;
// host/versions knows how to ask each.
var versionTools = []string{"kubeadm", "kubelet", "keepalived", "containerd"}

// versionsArgs are host/versions' values.
type versionsArgs struct {
	Tools []string
	Known []nodeprobes.KnownVersion
}

// versionsAfter reads the versions of versionTools, knowing those prev
// read with their stamps: a tool whose stamp is still prev's is not run.
func versionsAfter(prev HostState) versionsArgs {
	a := versionsArgs{Tools: versionTools}
	for _, t := range versionTools {
		if stamp, version := prev.Stamps[t], prev.Versions[t]; stamp != "" && version != "" {
			a.Known = append(a.Known, nodeprobes.KnownVersion{Tool: t, Stamp: stamp, Version: version})
		}
	}
	return a
}

func (a versionsArgs) Script() scripts.Script { return scripts.Render("host/versions", a) }

func (Host) Create(ctx context.Context, req infer.CreateRequest[HostArgs]) (infer.CreateResponse[HostState], error) {
	if req.DryRun {
		// A preview already names a machine that is another cluster's or
		// another node's; one it cannot reach yet is for the up to check.
		if st, err := readFacts(reading(ctx), req.Inputs); err == nil {
			if problems := st.identityProblems(); len(problems) > 0 {
				return infer.CreateResponse[HostState]{}, wrongMachine(req.Inputs.Connection.Node, problems)
			}
		}
		return infer.CreateResponse[HostState]{ID: req.Inputs.Connection.Node, Output: HostState{HostArgs: req.Inputs}}, nil
	}
	st, err := readFacts(ctx, req.Inputs)
	if err != nil {
		return infer.CreateResponse[HostState]{}, err
	}
	for _, w := range st.runtimeWarnings() {
		p.GetLogger(ctx).Warning(w)
	}
	if err := st.check(); err != nil {
		return infer.CreateResponse[HostState]{}, err
	}
	st.ConvergedHostKey = st.HostKey
	return infer.CreateResponse[HostState]{ID: req.Inputs.Connection.Node, Output: st}, nil
}

// readFacts reads every fact afresh: no version is taken from a stamp.
func readFacts(ctx context.Context, in HostArgs) (HostState, error) {
	c, err := dial(ctx, in.Connection)
	if err != nil {
		return HostState{HostArgs: in, Versions: map[string]string{}}, err
	}
	defer c.Close()
	return factsOf(ctx, c, in, HostState{})
}

// factsOf reads the node's facts; a tool whose stamp is prev's keeps
// prev's version (versionsAfter).
func factsOf(ctx context.Context, c ssh.Executor, in HostArgs, prev HostState) (HostState, error) {
	st := HostState{HostArgs: in, Versions: map[string]string{}, Stamps: map[string]string{}}
	st.HostKey = c.HostKey()
	facts := nodeFacts
	facts.Versions, facts.Requires = versionsAfter(prev), in.Requires
	facts.RuntimeDump = in.Runtime != nil && !in.Runtime.Manage
	facts.RuntimeSocket = strings.TrimPrefix(containerd.Socket, "unix://")
	out, _, err := query(ctx, c, facts.Script())
	if err != nil {
		return st, fmt.Errorf("%s: reading facts: %w", in.Connection.Node, err)
	}
	st.parseFacts(out)
	if facts.RuntimeDump {
		st.parseRuntime(out)
	}
	if ca := nodefacts.Lines(out, "ca"); ca != nil {
		st.CA, _ = pki.CAPin(ca)
	}
	st.JoinedAs = pki.NodeNameOf(nodefacts.Lines(out, "kubeletcert"))
	if st.JoinedAs == "" && nodefacts.Lines(out, "kubeletconf") != nil {
		st.JoinedAs = embeddedNodeName(ctx, c)
	}
	return st, nil
}

// parseFacts reads the facts script's key=value lines into st.
func (st *HostState) parseFacts(out string) {
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if tool, stamp, ok := nodefacts.ToolFact(k); ok {
			if stamp {
				st.Stamps[tool] = v
			} else {
				st.Versions[tool] = v
			}
			continue
		}
		switch {
		case k == "hostname":
			st.Hostname = v
		case k == "kernel":
			st.Kernel = v
		case k == "os":
			st.OS = v
		case k == "mac":
			st.MACs = append(st.MACs, v)
		case k == "addr":
			st.Addresses = append(st.Addresses, v)
		case k == "gpu":
			st.GPUs = append(st.GPUs, v)
		case k == "missing":
			st.Missing = append(st.Missing, v)
		}
	}
	sort.Strings(st.MACs)
	sort.Strings(st.Addresses)
}

// embeddedNodeName is the node name of the client certificate kubelet.conf
// embeds: who the machine's kubelet is when it has no rotating one.
func embeddedNodeName(ctx context.Context, c ssh.Executor) string {
	data, err := c.Read(ctx, kubeletConf)
	if err != nil {
		return ""
	}
	kc, err := clientcmd.Load(data)
	if err != nil {
		return ""
	}
	for _, auth := range kc.AuthInfos {
		if name := pki.NodeNameOf(auth.ClientCertificateData); name != "" {
			return name
		}
	}
	return ""
}

// identityProblems says when the machine at the node's address is not that
// node to any cluster: it holds another cluster's CA (a bundle or state
// mix-up, or a machine never reset), or it joined under another name (a
// renamed node in the inventory). Nothing may be written to it then: each
// file would overwrite another cluster's, or another node's.
func (st HostState) identityProblems() []string {
	node := st.Connection.Node
	var out []string
	if st.ClusterCA != "" && st.CA != "" && st.CA != st.ClusterCA {
		out = append(out, fmt.Sprintf("belongs to another cluster: its Kubernetes CA is %s, this inventory's secrets bundle has %s. "+
			"If the bundle is the wrong one, give the cluster's own (homelab --secrets, or the stack's secrets config); "+
			"if kubeadm built that cluster by hand, take it over with homelab adopt; if the machine is yours to rebuild, reset it first (kubeadm reset -f, then rm -rf /etc/kubernetes/pki on it)",
			st.CA, st.ClusterCA))
	}
	if st.JoinedAs != "" && st.JoinedAs != node {
		out = append(out, fmt.Sprintf("is joined to the cluster as %[1]s, not %[2]s: a renamed node is a removal and a new join of the same machine. "+
			"Keep the name %[1]s in the inventory; to rename it, first remove %[1]s from the inventory and run up --allow-destroy %[1]s, then declare the machine as %[2]s and run up again",
			st.JoinedAs, node))
	}
	return out
}

// WrongMachineMarker starts the error of a machine that is another
// cluster's or another node's: `homelab up` stops on it in its preview,
// before any node is written.
const WrongMachineMarker = "WRONG MACHINE:"

func wrongMachine(node string, problems []string) error {
	return fmt.Errorf("%s: %s the machine %s", node, WrongMachineMarker, strings.Join(problems, "; the machine "))
}

// check fails when the machine is not the one declared or lacks a tool.
func (st HostState) check() error {
	node := st.Connection.Node
	problems := st.identityProblems()
	if other := slices.DeleteFunc(slices.Clone(st.Missing), func(m string) bool { return m == "containerd" }); len(other) > 0 {
		problems = append(problems, fmt.Sprintf("lacks %s: install kubeadm, kubelet and kubectl from pkgs.k8s.io, a container runtime, and keepalived on control-plane nodes", strings.Join(other, ", ")))
	}
	if slices.Contains(st.Missing, "containerd") {
		problems = append(problems, "lacks containerd, the container runtime up configures: pin it in cluster.containerRuntime.packages ({containerd: VERSION, runc: VERSION}, as the node's apt sources list them), and up installs and holds it; "+
			"or install the distribution's (apt-get install containerd)")
	}
	if !slices.Contains(st.Addresses, st.Address) {
		problems = append(problems, fmt.Sprintf("does not have its declared address %s (it has %v): fix the node's network or the inventory", st.Address, st.Addresses))
	}
	if st.MAC != "" && !st.hasMAC(st.MAC) {
		problems = append(problems, fmt.Sprintf("has no NIC with the declared MAC %s (it has %v): a replaced NIC? update nodes[].mac in the inventory", st.MAC, st.MACs))
	}
	problems = append(problems, st.runtimeProblems()...)
	if len(problems) > 0 {
		return fmt.Errorf("%s %s", node, strings.Join(problems, "; "))
	}
	return nil
}

func (st HostState) hasMAC(mac string) bool {
	want, err := net.ParseMAC(mac)
	if err != nil {
		return false
	}
	for _, m := range st.MACs {
		if got, err := net.ParseMAC(m); err == nil && got.String() == want.String() {
			return true
		}
	}
	return false
}

// hostRead fails the refresh on a changed host key: a new host key is a
// different machine, or an attack, and no refresh may go on as if nothing
// happened. Anything else keeps the last facts, a refused key and a facts
// query cut off included: Host changes nothing on the node, a new key in
// the inventory is a connection change to hostChanges already, and Update
// reads every fact afresh before it checks them.
var hostRead = readPolicy[HostState]{Unreachable: keepLast, KeyRefused: keepLast, HostKeyChanged: failRead, NotAnswered: keepLast}

func (Host) Read(ctx context.Context, req infer.ReadRequest[HostArgs, HostState]) (infer.ReadResponse[HostArgs, HostState], error) {
	ctx = reading(ctx)
	st, err := readNode(ctx, req.State.Connection, req.State, hostRead, func(c ssh.Executor) (HostState, error) {
		st, err := factsOf(ctx, c, req.State.HostArgs, req.State)
		if err != nil {
			return st, unanswered(err)
		}
		return st, nil
	})
	if err != nil {
		return infer.ReadResponse[HostArgs, HostState]{}, err
	}
	st.ConvergedHostKey = req.State.ConvergedHostKey
	if st.ConvergedHostKey == "" {
		// State written before host keys were recorded.
		st.ConvergedHostKey = st.HostKey
	}
	return infer.ReadResponse[HostArgs, HostState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
}

// Diff shows a hardware change on this node alone: a declared address or
// MAC that differs from the last one seen live.
// hostChanges shows a hardware change on this node alone: a declared
// address or MAC that differs from the last one seen live. A machine that
// is another cluster's or another node's is no change to make: it is an
// error that stops the preview, naming it, before anything else.
func hostChanges(in HostArgs, st HostState) (changeSet, error) {
	d := changeSet{}
	if in.Address != st.Address || !slices.Contains(st.Addresses, in.Address) {
		d.update("address")
	}
	if in.MAC != st.MAC || (in.MAC != "" && !st.hasMAC(in.MAC)) {
		d.update("mac")
	}
	if in.Connection != st.Connection {
		d.update("connection")
	}
	if !sameRuntimeExpect(in.Runtime, st.Runtime) {
		d.update("runtime")
	}
	if st.ConvergedHostKey != "" && st.HostKey != st.ConvergedHostKey {
		d.update("hostKey")
	}
	if !slices.Equal(in.Requires, st.Requires) || len(st.Missing) > 0 {
		d.update("requires")
	}
	live := st
	live.HostArgs = in
	if problems := live.identityProblems(); len(problems) > 0 {
		return nil, wrongMachine(in.Connection.Node, problems)
	}
	return d, nil
}

// sameRuntimeExpect compares what containerd must agree with, leaving out
// the Kubernetes version: a version bump alone must not re-read every
// node before the upgrade, which itself handles nodes it cannot reach
// (--upgrade-without); a node is judged against the version it was
// created or last updated with.
func sameRuntimeExpect(a, b *RuntimeExpect) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	x.KubernetesVersion, y.KubernetesVersion = "", ""
	return x == y
}

func (Host) Diff(ctx context.Context, req infer.DiffRequest[HostArgs, HostState]) (infer.DiffResponse, error) {
	d, err := hostChanges(req.Inputs, req.State)
	if err != nil {
		return infer.DiffResponse{}, err
	}
	return d.diff(false), nil
}

func (Host) Update(ctx context.Context, req infer.UpdateRequest[HostArgs, HostState]) (infer.UpdateResponse[HostState], error) {
	if req.DryRun {
		st := req.State
		st.HostArgs = req.Inputs
		return infer.UpdateResponse[HostState]{Output: st}, nil
	}
	st, err := readFacts(ctx, req.Inputs)
	if err != nil {
		return infer.UpdateResponse[HostState]{}, err
	}
	if old := req.State.ConvergedHostKey; old != "" && old != st.HostKey {
		p.GetLogger(ctx).Warningf("%s is another machine now (host key %s, was %s): its cluster state is rebuilt", req.Inputs.Connection.Node, st.HostKey, old)
	}
	st.ConvergedHostKey = st.HostKey
	for _, w := range st.runtimeWarnings() {
		p.GetLogger(ctx).Warning(w)
	}
	return infer.UpdateResponse[HostState]{Output: st}, st.check()
}
