package nodefacts

import (
	"path"
	"strings"
)

// Renewable is a certificate kubeadm issued on a control-plane node and
// how it is issued again from the node's CAs.
type Renewable struct {
	// Path is the certificate file, or the kubeconfig that embeds it.
	Path string
	// Phase is its `kubeadm init phase certs` name; empty for a
	// kubeconfig, which `kubeadm certs renew` renews by its file name:
	// a kubeconfig carries no SANs, so renew's reuse of the old
	// certificate's fields (kubeadm #1447) loses nothing there, while a
	// serving certificate must come from the phase and the current config.
	Phase string
	// CA is kubeadm's base name of the CA that issues it, relative to
	// PKIDir (ca, front-proxy-ca, etcd/ca).
	CA string
	// RestartPod is the static pod that reads it only when it starts, and
	// so must be restarted to use the new one; "" when whatever reads it
	// reloads it by itself: the apiserver its serving, front-proxy and
	// kubelet client certificates from the files (dynamiccertificates,
	// client-go's cert rotation) and its etcd client certificate on every
	// handshake, as etcd does its own certificates.
	RestartPod string
	// Outage is what its expiry takes down on its node.
	Outage Outage
}

// Outage is what a certificate's expiry takes down on its node, which
// decides whether the control plane can be renewed one node at a time
// (something keeps serving) or must be revived (nothing does).
type Outage int

const (
	// NoOutage: a client of the API or of a component fails (admin.conf,
	// the controller-manager's kubeconfig), or a feature (the apiserver's
	// kubelet and front-proxy clients): the API is still served.
	NoOutage Outage = iota
	// APIOutage: the node's apiserver cannot serve: its own certificate
	// fails every client's TLS, or it cannot reach etcd (its etcd client
	// certificate, or etcd's serving certificate its client verifies: the
	// apiserver talks to its node's own member).
	APIOutage
	// PeerOutage: the node's etcd member can no longer reach its peers,
	// nor they it (the peer certificate serves both ends): quorum counts
	// it out.
	PeerOutage
)

// Renewables are every certificate up renews on a control-plane node, in
// the order it renews them. The kubelet's client certificate is not among
// them: the kubelet rotates it itself (rotateCertificates).
var Renewables = []Renewable{
	{Path: PKIFile(APIServerCert), Phase: "apiserver", CA: "ca", Outage: APIOutage},
	{Path: PKIFile("apiserver-kubelet-client.crt"), Phase: "apiserver-kubelet-client", CA: "ca"},
	{Path: PKIFile("apiserver-etcd-client.crt"), Phase: "apiserver-etcd-client", CA: "etcd/ca", Outage: APIOutage},
	{Path: PKIFile("front-proxy-client.crt"), Phase: "front-proxy-client", CA: "front-proxy-ca"},
	{Path: PKIFile(EtcdServerCert), Phase: "etcd-server", CA: "etcd/ca", Outage: APIOutage},
	{Path: PKIFile(EtcdPeerCert), Phase: "etcd-peer", CA: "etcd/ca", Outage: PeerOutage},
	{Path: PKIFile("etcd/healthcheck-client.crt"), Phase: "etcd-healthcheck-client", CA: "etcd/ca"},
	{Path: AdminConf, CA: "ca"},
	{Path: SuperAdminConf, CA: "ca"},
	{Path: ControllerManagerConf, CA: "ca", RestartPod: KubeControllerManager},
	{Path: SchedulerConf, CA: "ca", RestartPod: KubeScheduler},
}

// RenewableOf returns the renewable certificate at path (a file or a
// kubeconfig, as ParseExpiry names it).
func RenewableOf(p string) (Renewable, bool) {
	for _, r := range Renewables {
		if r.Path == p {
			return r, true
		}
	}
	return Renewable{}, false
}

// RenewableNamed returns the renewable certificate of that Name.
func RenewableNamed(name string) (Renewable, bool) {
	for _, r := range Renewables {
		if r.Name() == name {
			return r, true
		}
	}
	return Renewable{}, false
}

// Name is how kubeadm's users name it: a certificate relative to PKIDir
// (etcd/server.crt), a kubeconfig by its file name (admin.conf).
func (r Renewable) Name() string {
	if rel, ok := strings.CutPrefix(r.Path, PKIDir+"/"); ok {
		return rel
	}
	return path.Base(r.Path)
}

// Kubeconfig reports whether the certificate is embedded in a kubeconfig.
func (r Renewable) Kubeconfig() bool { return r.Phase == "" }
