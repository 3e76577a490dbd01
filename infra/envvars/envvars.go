// Package envvars is the one list of the environment variables homelab
// reads: the product's, the emulated homelab's and the tests'. Every other
// package names a variable through a constant here, and a test keeps it so
// (a HOMELAB_ name spelled anywhere else in Go fails it), so a user or
// packager finds them all in one place, each with what reads it.
package envvars

// The product: homelab, its Pulumi program and provider.
const (
	// StateDir is where `homelab up` keeps its local Pulumi backend,
	// passphrase and secrets bundle (default $XDG_STATE_HOME/homelab or
	// ~/.local/state/homelab; --state-dir wins).
	StateDir = "HOMELAB_STATE_DIR"
	// AllowDestroy names the nodes (comma-separated, * for all) on which a
	// destructive step may run, for the Pulumi CLI path; `homelab up` takes
	// --allow-destroy and ignores an exported value.
	AllowDestroy = "HOMELAB_ALLOW_DESTROY"
	// RenewCertificates names the control-plane nodes (comma-separated,
	// * for all) whose certificates are renewed whatever their dates, for
	// the Pulumi CLI path; `homelab up` takes --renew-certificates and
	// ignores an exported value.
	RenewCertificates = "HOMELAB_RENEW_CERTIFICATES"
	// UpgradeWithout names nodes (comma-separated) left out of this run's
	// Kubernetes upgrade (powered off, say), for the Pulumi CLI path;
	// `homelab up` takes --upgrade-without and ignores an exported value.
	UpgradeWithout = "HOMELAB_UPGRADE_WITHOUT"
	// Netns is a network namespace path from which the provider, verify and
	// doctor dial the nodes (the emulated homelab's gateway; set by homelab
	// itself for an inventory of the running lab).
	Netns = "HOMELAB_NETNS"
	// CommandLog is a file every SSH command is appended to, marked
	// mutating or not, and every change made through an SSH tunnel (the
	// tests count mutating commands with it).
	CommandLog = "HOMELAB_COMMAND_LOG"
	// Cache is where infra/tools/setup.sh builds kubeadm, etcd, the Pulumi
	// CLI and the language host, keyed by version (default
	// ~/.cache/homelab).
	Cache = "HOMELAB_CACHE"
)

// The emulated homelab (homelab-lab ...) and its stand-ins.
const (
	// LabDir is the lab's directory (default /srv/homelab-lab).
	LabDir = "HOMELAB_LAB_DIR"
	// LabBoot marks the re-executed process that boots one lab node.
	LabBoot = "HOMELAB_LAB_BOOT"
	// LabBootStage marks a real lab node's boot once its PID 1 has joined
	// its cgroups and entered its own cgroup namespace ("2").
	LabBootStage = "HOMELAB_LAB_BOOT_STAGE"
	// LabAptServe marks the re-executed process that serves the lab's apt
	// repository in the gateway namespace ("ADDRESS DIR").
	LabAptServe = "HOMELAB_LAB_APT_SERVE"
	// LabRegistryServe marks the re-executed process that serves the lab's
	// container registry in the gateway namespace ("ADDRESS LIST", LIST a file
	// naming the image layouts it serves).
	LabRegistryServe = "HOMELAB_LAB_REGISTRY_SERVE"
	// NodeBin, KubeDir and EtcdDir point the lab at prebuilt binaries: the
	// stand-ins' homelab-node, the Kubernetes binaries, etcd.
	NodeBin = "HOMELAB_NODE_BIN"
	KubeDir = "HOMELAB_KUBE_DIR"
	EtcdDir = "HOMELAB_ETCD_DIR"
	// InitSocket and InitRoot tell the init and systemctl stand-ins where
	// the node's init listens and where its unit files are.
	InitSocket = "HOMELAB_INIT_SOCKET"
	InitRoot   = "HOMELAB_INIT_ROOT"
)

// The tests.
const (
	// E2E=1 runs the end-to-end tests (root, builds labs).
	E2E = "HOMELAB_E2E"
	// RequireTools=1 (CI) fails a test whose tool is missing instead of
	// skipping it.
	RequireTools = "HOMELAB_REQUIRE_TOOLS"
	// ToolstestChild=1 makes toolstest's own test the child process it
	// runs to watch Missing skip or fail.
	ToolstestChild = "HOMELAB_TOOLSTEST_CHILD"
	// LabSlots is how many labs the tests run at once (default: one per
	// two cores and per 6 GiB of memory).
	LabSlots = "HOMELAB_LAB_SLOTS"
	// E2EKeep=1 keeps a failed test's lab up for a look inside.
	E2EKeep = "HOMELAB_E2E_KEEP"
	// E2ELong=1 also runs the lab tests CI's time leaves out.
	E2ELong = "HOMELAB_E2E_LONG"
	// DrillLayout, DrillSeconds and DrillKinds shape BenchmarkDrills
	// (docs/layouts.md).
	DrillLayout  = "HOMELAB_DRILL_LAYOUT"
	DrillSeconds = "HOMELAB_DRILL_SECONDS"
	DrillKinds   = "HOMELAB_DRILL_KINDS"
	// KubeBinDir points the CRI stand-in's test at the Kubernetes binaries.
	KubeBinDir = "HOMELAB_KUBE_BIN_DIR"
	// KubeletITestNetns is the namespace the kubelet stand-in's
	// integration test re-executes itself in.
	KubeletITestNetns = "HOMELAB_KUBELET_ITEST_NETNS"
)
