// Package nodeprobes renders the read-only scripts under infra/scripts'
// nodefacts/ that read kubeadm's facts off a node; roles/nodefacts, pure,
// parses what they print. The scripts' values are its paths and lists,
// and roles must not import infra: so the typed values live here, beside
// the scripts, as exported structs that a script including one of these
// ({{template "nodefacts/state" .State}}) holds as a field.
//
// Every XAt takes root, a test's file tree the script reads below (""
// is the node's own /); X is XAt("") rendered, what a node receives.
package nodeprobes

import (
	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/roles/netplan"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// ExpiryArgs are nodefacts/expiry's values.
type ExpiryArgs struct {
	Root string
	// Certs are the certificate files read (kubeadm's leaves and the
	// kubelet's client certificate), KubernetesDir where the kubeconfigs
	// are.
	Certs         []string
	KubernetesDir string
}

func ExpiryAt(root string) ExpiryArgs {
	return ExpiryArgs{Root: root, Certs: append(append([]string{}, nodefacts.LeafCerts...), nodefacts.KubeletClientCert), KubernetesDir: nodefacts.KubernetesDir}
}

func (a ExpiryArgs) Script() scripts.Script { return scripts.Render("nodefacts/expiry", a) }

// Expiry reads every certificate's end of validity (nodefacts.ParseExpiry).
func Expiry() scripts.Script { return ExpiryAt("").Script() }

// ProbeArgs are nodefacts/probe's values.
type ProbeArgs struct {
	Root          string
	Files         []string
	KubernetesDir string
}

func ProbeAt(root string) ProbeArgs {
	return ProbeArgs{Root: root, Files: nodefacts.ProbedFiles(), KubernetesDir: nodefacts.KubernetesDir}
}

func (a ProbeArgs) Script() scripts.Script { return scripts.Render("nodefacts/probe", a) }

// Probe reads a node's own configuration (nodefacts.ParseProbe).
func Probe() scripts.Script { return ProbeAt("").Script() }

// LiveArgs are nodefacts/live's values: the probe's and the expiry's.
type LiveArgs struct {
	Probe  ProbeArgs
	Expiry ExpiryArgs
}

func LiveAt(root string) LiveArgs { return LiveArgs{ProbeAt(root), ExpiryAt(root)} }

func (a LiveArgs) Script() scripts.Script { return scripts.Render("nodefacts/live", a) }

// Live is Probe and Expiry in one session.
func Live() scripts.Script { return LiveAt("").Script() }

// KubeletClientArgs are nodefacts/kubeletclient's values.
type KubeletClientArgs struct {
	Root                            string
	KubeletConf, ClientCert, CACert string
}

func KubeletClientAt(root string) KubeletClientArgs {
	return KubeletClientArgs{Root: root, KubeletConf: nodefacts.KubeletConf, ClientCert: nodefacts.KubeletClientCert, CACert: nodefacts.CACert}
}

func (a KubeletClientArgs) Script() scripts.Script {
	return scripts.Render("nodefacts/kubeletclient", a)
}

// KubeletClient reads the kubelet's client credentials, no key
// (nodefacts.ParseKubeletClient).
func KubeletClient() scripts.Script { return KubeletClientAt("").Script() }

// TraceArgs are nodefacts/trace's values: one nodefacts.Trace.
type TraceArgs struct {
	Root, Path string
	Dir, Glob  bool
}

func TraceAt(root string, t nodefacts.Trace) TraceArgs {
	return TraceArgs{Root: root, Path: t.Path, Dir: t.Kind == nodefacts.Dir, Glob: t.Kind == nodefacts.AnyMatch}
}

func tracesAt(root string, ts []nodefacts.Trace) []TraceArgs {
	out := make([]TraceArgs, len(ts))
	for i, t := range ts {
		out[i] = TraceAt(root, t)
	}
	return out
}

// StateArgs are nodefacts/state's values.
type StateArgs struct {
	Markers, Files, Leftovers []TraceArgs
}

// StateAt checks for one of markers and all files (regular files), and
// nodefacts.Leftovers.
func StateAt(root string, markers []string, files ...string) StateArgs {
	return StateArgs{tracesAt(root, nodefacts.Files(markers...)), tracesAt(root, nodefacts.Files(files...)), tracesAt(root, nodefacts.Leftovers)}
}

func (a StateArgs) Script() scripts.Script { return scripts.Render("nodefacts/state", a) }

// State prints nodefacts.StateSetUp when one of markers and all files
// are on the node, nodefacts.StatePartial when kubeadm left something
// behind (nodefacts.Leftovers), nodefacts.StateNone otherwise.
func State(markers []string, files ...string) scripts.Script {
	return StateAt("", markers, files...).Script()
}

// PresenceArgs are nodefacts/presence's values.
type PresenceArgs struct{ Traces []TraceArgs }

// PresenceAt looks for traces and for each of nodefacts.Leftovers, so
// nodefacts.HasLeftovers can be asked of what it found.
func PresenceAt(root string, traces ...nodefacts.Trace) PresenceArgs {
	var a PresenceArgs
	seen := map[nodefacts.Trace]bool{}
	for _, t := range append(append([]nodefacts.Trace{}, traces...), nodefacts.Leftovers...) {
		if !seen[t] {
			seen[t] = true
			a.Traces = append(a.Traces, TraceAt(root, t))
		}
	}
	return a
}

func (a PresenceArgs) Script() scripts.Script { return scripts.Render("nodefacts/presence", a) }

// Presence prints which of traces and nodefacts.Leftovers are on the
// node (nodefacts.ParsePresence).
func Presence(traces ...nodefacts.Trace) scripts.Script { return PresenceAt("", traces...).Script() }

// FileStatsArgs are nodefacts/filestats' values.
type FileStatsArgs struct{ Paths []string }

// FileStats reads the modes and checksums of paths
// (nodefacts.ParseFileStats, with the same paths).
func FileStats(paths []string) scripts.Script {
	return scripts.Render("nodefacts/filestats", FileStatsArgs{paths})
}

// VersionsArgs are nodefacts/versions' values (Tools and Known for
// host/versions, which it includes).
type VersionsArgs struct {
	Root                                  string
	Tools                                 []string
	Known                                 []KnownVersion
	Manifests                             []string
	InitMarker, JoinMarker, KubeletConfig string
}

// KnownVersion is a tool's version an earlier read found, with the stamp
// of the file it ran: a tool still that file is not run again.
type KnownVersion struct{ Tool, Stamp, Version string }

// VersionTools are the tools whose versions an upgrade reads: the
// kubelet's decides what is due, containerd's whether the target's
// kubelet can run on it.
var VersionTools = []string{"kubelet", "containerd"}

// VersionsAt knows what known says an earlier read found (none: every
// tool runs).
func VersionsAt(root string, known ...KnownVersion) VersionsArgs {
	a := VersionsArgs{Root: root, Tools: VersionTools, Known: known,
		InitMarker: nodefacts.InitMarker, JoinMarker: nodefacts.JoinMarker, KubeletConfig: nodefacts.KubeletConfigFile}
	for _, c := range nodefacts.VersionedComponents {
		a.Manifests = append(a.Manifests, nodefacts.Manifest(c))
	}
	return a
}

func (a VersionsArgs) Script() scripts.Script { return scripts.Render("nodefacts/versions", a) }

// Versions reads what a node runs (nodefacts.ParseVersions), knowing
// what an earlier read found.
func Versions(known ...KnownVersion) scripts.Script {
	return VersionsAt("", known...).Script()
}

// StampsArgs are nodefacts/stamps' values.
type StampsArgs struct{ Tools []string }

// GPUDetectArgs are gpu/detect's values: where the PCI devices are.
type GPUDetectArgs struct{ PCI string }

// GPUDetectAt lists the GPUs of the PCI devices under pci (a test's tree).
func GPUDetectAt(pci string) GPUDetectArgs { return GPUDetectArgs{PCI: pci} }

func (a GPUDetectArgs) Script() scripts.Script { return scripts.Render("gpu/detect", a) }

// GPUDetect lists what a node shows of NVIDIA GPUs (gpu.ParseDetection):
// the provider (whether to install the toolkit) and doctor (declared vs
// detected) both run it.
func GPUDetect() scripts.Script { return GPUDetectAt(PCIDevices).Script() }

// PCIDevices is where a node's kernel lists its PCI devices.
const PCIDevices = "/sys/bus/pci/devices"

// Netplan reads a node's netplan and what configures its NIC iface
// (netplan.ParseRead).
func Netplan(iface string) scripts.Script {
	return scripts.Render("netplan/read", struct{ Path, Interface string }{netplan.Path, iface})
}
