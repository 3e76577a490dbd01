// Package nodefacts is the one home of what kubeadm leaves on a node and
// how to read it back, as kubeadm keeps its own in cmd/kubeadm/app/constants:
// the paths of its manifests, kubeconfigs, PKI and etcd data, the names of
// the control-plane components and their phases, the files whose presence
// means "kubeadm left something here", and pure functions that read
// manifests' flags and certificates' SANs. The provider, doctor, adopt,
// etcdbackup and the drill all read nodes through it, so none of them can
// drift from the others. Nothing here touches a machine: the scripts are
// strings for a caller's SSH session, their parsers pure functions.
package nodefacts

import (
	"path"
	"strings"
)

// Paths kubeadm writes on a node (its defaults; homelab never changes them).
const (
	KubernetesDir = "/etc/kubernetes"
	ManifestsDir  = KubernetesDir + "/manifests"
	PKIDir        = KubernetesDir + "/pki"

	AdminConf             = KubernetesDir + "/admin.conf"
	SuperAdminConf        = KubernetesDir + "/super-admin.conf"
	KubeletConf           = KubernetesDir + "/kubelet.conf"
	ControllerManagerConf = KubernetesDir + "/controller-manager.conf"
	SchedulerConf         = KubernetesDir + "/scheduler.conf"

	CACert     = PKIDir + "/ca.crt"
	CAKey      = PKIDir + "/ca.key"
	EtcdCACert = PKIDir + "/etcd/ca.crt"

	// KubeletFlagsEnv is where kubeadm puts the kubelet's node-specific
	// flags (--node-ip among them) as KUBELET_KUBEADM_ARGS.
	KubeletFlagsEnv = "/var/lib/kubelet/kubeadm-flags.env"
	KubeletPKIDir   = "/var/lib/kubelet/pki"
	// KubeletServingCert is the kubelet's current serving pair (certificate
	// then key) once it has one from the cluster CA (serverTLSBootstrap):
	// its certificate store's -current link.
	KubeletServingCert = KubeletPKIDir + "/kubelet-server-current.pem"
	// KubeletConfigFile is the kubelet's configuration kubeadm writes from
	// the cluster's kubelet-config ConfigMap.
	KubeletConfigFile = "/var/lib/kubelet/config.yaml"

	EtcdDataDir = "/var/lib/etcd"
	// EtcdMemberDir exists once a member has started: data that an init
	// must never write over.
	EtcdMemberDir = EtcdDataDir + "/member"
	// EtcdWALDir is the member's write-ahead log, which etcd makes on its
	// first start: a member directory without it holds no data (an init
	// killed before etcd ran), one with it may hold the cluster's.
	EtcdWALDir = EtcdMemberDir + "/wal"
	// EtcdAsideDir keeps, one timestamped directory per reset, the etcd
	// data a reset took off a node: kubeadm's reset deletes the data
	// directory, and nothing of etcd's is deleted without a trace.
	EtcdAsideDir = "/var/lib/homelab/etcd-aside"
	// ClusterLockDir is the lock a run that changes the cluster holds on
	// a majority of the control-plane nodes (infra/clusterlock).
	ClusterLockDir = "/var/lib/homelab/cluster.lock"
	// RestoreAsideDir holds the control plane's static pod manifests
	// while `homelab etcd restore` runs; an interrupted restore leaves
	// them there.
	RestoreAsideDir = KubernetesDir + "/manifests.homelab-restore"
)

// Markers homelab writes once kubeadm init or join returned success:
// kubeadm writes admin.conf and the manifests early, so their presence
// does not mean a run finished (RBAC, configs and tokens come last).
// Without its marker, a node holding kubeadm's files counts as an
// interrupted run and is reset; `homelab adopt` writes them on the nodes
// of a cluster kubeadm built by hand, once each is verified set up.
const (
	InitMarker = KubernetesDir + "/.homelab-init-complete"
	JoinMarker = KubernetesDir + "/.homelab-join-complete"
	// MarkerGlob matches both, for a reset that removes them.
	MarkerGlob = KubernetesDir + "/.homelab-*-complete"
)

// The control-plane components kubeadm runs as static pods, by pod name.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
)

// ControlPlaneComponents are the static pods of a stacked control-plane node.
var ControlPlaneComponents = []string{Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler}

// Manifest is the static pod manifest of a component.
func Manifest(component string) string { return ManifestsDir + "/" + component + ".yaml" }

// ComponentPhase is `kubeadm init phase control-plane`'s name for each
// component it writes a manifest for (etcd's is `etcd local`).
var ComponentPhase = map[string]string{
	KubeAPIServer:         "apiserver",
	KubeControllerManager: "controller-manager",
	KubeScheduler:         "scheduler",
}

// OwnKubeconfigs are the kubeconfigs whose server kubeadm sets to the
// node's own address; admin.conf points at the controlPlaneEndpoint.
var OwnKubeconfigs = []string{KubeletConf, ControllerManagerConf, SchedulerConf, SuperAdminConf}

// CompletionFiles are the files whose presence, marker first, makes a node
// count as set up: the first control-plane node's init, another
// control-plane node's join, a worker's join.
func CompletionFiles(first, controlPlane bool) []string {
	switch {
	case first:
		return []string{InitMarker, AdminConf, Manifest(KubeAPIServer), Manifest(Etcd)}
	case controlPlane:
		return []string{JoinMarker, KubeletConf, Manifest(KubeAPIServer), Manifest(Etcd)}
	}
	return []string{JoinMarker, KubeletConf}
}

// IdentityFiles are the files of PKIDir that are the cluster's identity,
// relative to it: the three CAs with their keys and the service-account
// key pair. Everything else kubeadm issues from them; a reset must keep
// them, and adopt builds the secrets bundle from them.
var IdentityFiles = []string{"ca.crt", "ca.key", "front-proxy-ca.crt", "front-proxy-ca.key", "etcd/ca.crt", "etcd/ca.key", "sa.key", "sa.pub"}

// PKIFile is a file of the PKI directory given by its relative name
// ("etcd/server.crt").
func PKIFile(name string) string { return path.Join(PKIDir, name) }

// ProcessPattern matches a control-plane component's process by its
// command line (pgrep -f), the binary first: the kernel keeps only 15
// characters of a process name, so `pgrep -x kube-controller-manager`
// matches nothing, and an unanchored pattern would match the very shell
// that runs pkill.
func ProcessPattern(component string) string {
	return "^([^ ]*/)?" + strings.ReplaceAll(component, ".", `\.`) + "( |$)"
}

// HealthEndpoints are where the controller-manager and the scheduler
// answer whether they run (host:port/path on the node, HTTPS with a
// certificate of their own), as kubeadm waits for them.
var HealthEndpoints = map[string]string{
	KubeControllerManager: "127.0.0.1:10257/healthz",
	KubeScheduler:         "127.0.0.1:10259/livez",
}
