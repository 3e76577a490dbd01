package program

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles"
	"github.com/homelab-dev/homelab/roles/etcdsnapshot"
	"github.com/homelab-dev/homelab/roles/file"
	"github.com/homelab-dev/homelab/roles/gpu"
	"github.com/homelab-dev/homelab/roles/keepalived"
	"github.com/homelab-dev/homelab/roles/kubeadm"
	"github.com/homelab-dev/homelab/roles/pki"
)

// Cluster is the whole homelab: a ControlPlane per control-plane node, a
// Worker per worker, etcd's membership and cluster-wide objects.
type Cluster struct {
	pulumi.ResourceState

	Endpoint    pulumi.StringOutput      `pulumi:"endpoint"`
	Kubeconfig  pulumi.StringOutput      `pulumi:"kubeconfig"`
	EtcdMembers pulumi.MapArrayOutput    `pulumi:"etcdMembers"`
	SANs        pulumi.StringArrayOutput `pulumi:"sans"`
	// MACs are each node's NIC MACs as its Host last read them: how
	// doctor finds a node that moved when the inventory declares no MAC.
	MACs pulumi.StringArrayMapOutput `pulumi:"macs"`
}

// ControlPlane is one control-plane node: its host, files, keepalived and
// its membership (a control-plane join, or the init that made it one).
type ControlPlane struct {
	pulumi.ResourceState
	Host       *HostHandle
	Keepalived *ServiceHandle
	Join       *KubeadmJoinHandle
	// Runtime is containerd restarted on its managed configuration (nil
	// when the user configures it).
	Runtime pulumi.Resource
	files   *nodeFiles
}

// Worker is one worker node: host, files, join, labels and taints.
type Worker struct {
	pulumi.ResourceState
	Host    *HostHandle
	Join    *KubeadmJoinHandle
	Runtime pulumi.Resource
}

// NewCluster declares the homelab's resources in the HA bootstrap order,
// as a list of named stages (kubeadm's phase list, one level up): each
// stage declares its resources and what later stages wait for.
//
// No resource's identity depends on the order nodes are listed in: every
// control-plane node gets the same kinds of resource (an init config, a
// join), and the bootstrap is one cluster-wide resource that runs kubeadm
// init only where no cluster exists yet. Listing the nodes in another
// order changes nothing on any node.
func NewCluster(ctx *pulumi.Context, name string, cfg Config, opts ...pulumi.ResourceOption) (*Cluster, error) {
	cl := &Cluster{}
	if err := ctx.RegisterComponentResource("homelab:cluster:Cluster", name, cl, opts...); err != nil {
		return nil, err
	}
	rendered, err := roles.Render(cfg.Inventory, cfg.Bundle)
	if err != nil {
		return nil, err
	}
	b := &build{ctx: ctx, cl: cl, cfg: cfg, r: rendered, inv: cfg.Inventory,
		cps: cfg.Inventory.ControlPlanes(), boot: cfg.Inventory.Bootstrap(),
		planes: map[string]*ControlPlane{}, workerOf: map[string]*Worker{}, fileDeps: map[string][]pulumi.Resource{}}
	b.via = connection(cfg, b.boot)
	for _, st := range stages {
		if err := st.run(b); err != nil {
			return nil, fmt.Errorf("%s: %w", st.name, err)
		}
	}
	return cl, nil
}

// stages are NewCluster's steps in order.
var stages = []struct {
	name string
	run  func(*build) error
}{
	{"hosts", (*build).hosts},
	{"kubernetes upgrade", (*build).upgrade},
	{"control-plane files and keepalived", (*build).controlPlanes},
	{"control-plane images", (*build).images},
	{"revival", (*build).revival},
	{"bootstrap", (*build).bootstrap},
	{"control-plane joins", (*build).controlPlaneJoins},
	{"workers", (*build).workers},
	{"etcd membership", (*build).etcdMembership},
	{"control-plane addresses", (*build).controlPlaneAddresses},
	{"kubelet serving certificates", (*build).kubeletServing},
	{"pod network", (*build).podNetwork},
	{"cluster objects", (*build).clusterObjects},
	{"outputs", (*build).outputs},
}

// build is what the stages hand on to each other.
type build struct {
	ctx  *pulumi.Context
	cl   *Cluster
	cfg  Config
	r    *roles.Rendered
	inv  *inventory.Inventory
	cps  []inventory.Node
	boot inventory.Node
	via  pulumi.Map

	planes      map[string]*ControlPlane
	workerOf    map[string]*Worker
	upgraded    *KubernetesUpgradeHandle
	fileDeps    map[string][]pulumi.Resource
	keepaliveds []pulumi.Resource
	runtime     pulumi.Resource // the last node's managed containerd, which the next one's restart waits for
	runtimePkg  pulumi.Resource // the last node's containerd package, which the next one's install waits for
	revived     *ControlPlaneRevivalHandle
	init        *KubeadmInitHandle
	cpJoins     []pulumi.Resource // every control-plane join, in order
	joins       []pulumi.Resource // every join, workers' included
	etcd        *EtcdMembersHandle
	settled     pulumi.Resource // the last ControlPlaneAddress
}

// hosts: every node's component and Host (the machine checked to be the
// declared one, with the tools kubeadm needs), before anything changes.
func (b *build) hosts() error {
	for _, n := range b.inv.Nodes {
		conn := connection(b.cfg, n)
		if n.IsControlPlane() {
			cp := &ControlPlane{}
			if err := b.ctx.RegisterComponentResource("homelab:cluster:ControlPlane", n.Name, cp, pulumi.Parent(b.cl)); err != nil {
				return err
			}
			host, err := declareHost(b.ctx, cp, b.cfg, n, conn)
			if err != nil {
				return err
			}
			cp.Host, b.planes[n.Name] = host, cp
			continue
		}
		w := &Worker{}
		if err := b.ctx.RegisterComponentResource("homelab:cluster:Worker", n.Name, w, pulumi.Parent(b.cl)); err != nil {
			return err
		}
		host, err := declareHost(b.ctx, w, b.cfg, n, conn)
		if err != nil {
			return err
		}
		w.Host, b.workerOf[n.Name] = host, w
	}
	return nil
}

// upgrade moves a running cluster to the declared Kubernetes version
// before any node's packages or files are converged: they are the
// declared version's, and a kubelet installed before its control plane
// moved would break the version skew policy.
func (b *build) upgrade() error {
	var hosts []pulumi.Resource
	var cps, workers pulumi.Array
	// In name order, as etcd's members: the first control-plane node due
	// runs the apply, whatever order the inventory lists them in.
	for _, n := range slices.SortedFunc(slices.Values(b.inv.Nodes), func(a, c inventory.Node) int { return strings.Compare(a.Name, c.Name) }) {
		if n.IsControlPlane() {
			hosts = append(hosts, b.planes[n.Name].Host)
			cps = append(cps, connection(b.cfg, n))
		} else {
			hosts = append(hosts, b.workerOf[n.Name].Host)
			workers = append(workers, connection(b.cfg, n))
		}
	}
	u := b.inv.Cluster.Upgrade
	args := pulumi.Map{
		"controlPlanes":     cps,
		"workers":           workers,
		"kubernetesVersion": pulumi.String(b.inv.Cluster.KubernetesVersion),
		"maxUnavailable":    pulumi.Int(u.MaxUnavailable),
		"drainTimeout":      pulumi.String(u.DrainTimeout),
		"ignorePreflight":   pulumi.ToStringArray(b.cfg.IgnorePreflight),
		"port":              pulumi.Int(b.inv.Cluster.Endpoint.APIPort()),
		"endpoint":          pulumi.String(b.inv.Endpoint()),
	}
	if repo, ok := packagesRepository(b.cfg); ok {
		args["repository"] = repo
	}
	up, err := register(b.ctx, "KubernetesUpgrade", b.inv.Cluster.Name, args, &KubernetesUpgradeHandle{}, pulumi.Parent(b.cl), pulumi.DependsOn(hosts))
	b.upgraded = up
	return err
}

// runtimeDone is what the next node's runtime packages wait for: the last
// node's containerd restarted on its configuration (and, on a
// control-plane node, its control plane healthy again), else its package.
// A package swap restarts the node's pods; the next node's must wait.
func (b *build) runtimeDone() pulumi.Resource {
	return cmp.Or(b.runtime, b.runtimePkg)
}

// controlPlanes: every control-plane node's keepalived runs before init,
// so the endpoint answers while kubeadm bootstraps through it; one node at
// a time: restarting every instance at once (new peers after a
// re-address) would leave the VIP with no holder for a few advert
// intervals.
func (b *build) controlPlanes() error {
	for _, n := range b.cps {
		pkg, err := declareRuntimePackages(b.ctx, b.planes[n.Name], b.cfg, n, connection(b.cfg, n), b.planes[n.Name].Host, b.runtimeDone())
		if err != nil {
			return err
		}
		b.runtimePkg = cmp.Or[pulumi.Resource](pkg, b.runtimePkg)
		cp, deps, err := newControlPlane(b.ctx, b.planes[n.Name], b.cfg, b.r, n, b.upgraded, pkg, b.keepaliveds)
		if err != nil {
			return err
		}
		b.planes[n.Name], b.fileDeps[n.Name] = cp, deps
		if cp.Runtime, err = declareRuntime(b.ctx, cp, b.cfg, n, connection(b.cfg, n), filesOf(b.r, n.Name), cp.files, b.runtime); err != nil {
			return err
		}
		if cp.Runtime != nil {
			b.runtime = cp.Runtime
			b.fileDeps[n.Name] = append(b.fileDeps[n.Name], cp.Runtime)
		}
		if cp.Keepalived != nil {
			b.keepaliveds = append(b.keepaliveds, cp.Keepalived)
		}
	}
	return nil
}

// bootFirst lists the control-plane nodes, the bootstrap node first.
func (b *build) bootFirst() []inventory.Node {
	return append([]inventory.Node{b.boot}, slices.DeleteFunc(slices.Clone(b.cps), func(n inventory.Node) bool { return n.Name == b.boot.Name })...)
}

// images: each control-plane node pulls kubeadm's images once its init
// config (which names them) is written, so its init or join only starts
// them. The bootstrap node's pull holds up the init, so it pulls alone;
// the others pull while it bootstraps. A homelab's nodes share one
// uplink, and pulls beside the bootstrap node's would slow it.
func (b *build) images() error {
	order := b.bootFirst()
	var first pulumi.Resource
	for _, n := range order {
		deps := b.planes[n.Name].files.get(kubeadm.InitConfigPath)
		if rt := b.planes[n.Name].Runtime; rt != nil {
			deps = append(deps, rt) // pulls go through the restarted containerd
		}
		if first != nil {
			deps = append(deps, first)
		}
		images, err := register(b.ctx, "KubeadmImages", n.Name, pulumi.Map{
			"connection":        connection(b.cfg, n),
			"configPath":        pulumi.String(kubeadm.InitConfigPath),
			"kubernetesVersion": pulumi.String(b.inv.Cluster.KubernetesVersion),
			"ignorePreflight":   pulumi.ToStringArray(b.cfg.IgnorePreflight),
		}, &KubeadmImagesHandle{}, pulumi.Parent(b.planes[n.Name]), pulumi.DependsOn(deps))
		if err != nil {
			return err
		}
		if first == nil {
			first = images
		}
		b.fileDeps[n.Name] = append(b.fileDeps[n.Name], images)
	}
	return nil
}

// revival comes before anything that needs the API or etcd, which a
// control plane whose certificates expired cannot serve: everything that
// does follows the bootstrap, which waits for it. It needs every
// control-plane node's init config and CAs (the certificates are issued
// again from them) and keepalived (the API must answer through the
// endpoint again).
func (b *build) revival() error {
	deps := slices.Clone(b.keepaliveds)
	var nodes pulumi.Array
	for _, n := range b.cps {
		for _, f := range filesOf(b.r, n.Name) {
			if f.Path == kubeadm.InitConfigPath || strings.HasPrefix(f.Path, pki.CertificatesDir+"/") {
				deps = append(deps, b.planes[n.Name].files.get(f.Path)...)
			}
		}
		nodes = append(nodes, connection(b.cfg, n))
	}
	rv, err := register(b.ctx, "ControlPlaneRevival", "control-plane", pulumi.Map{
		"nodes":       nodes,
		"configPath":  pulumi.String(kubeadm.InitConfigPath),
		"port":        pulumi.Int(b.inv.Cluster.Endpoint.APIPort()),
		"renewBefore": pulumi.String(b.inv.Cluster.Certificates.RenewBefore),
		"endpoint":    pulumi.String(b.inv.Endpoint()),
	}, &ControlPlaneRevivalHandle{}, pulumi.Parent(b.cl), pulumi.DependsOn(deps))
	b.revived = rv
	return err
}

// bootstrap waits for the bootstrap node's files, every keepalived (the
// endpoint answers) and every node's init config: the cluster config is
// uploaded through whichever node the cluster runs on. And for the
// revival: uploading it needs the API, and so does everything after.
func (b *build) bootstrap() error {
	initDeps := append(slices.Clone(b.fileDeps[b.boot.Name]), b.keepaliveds...)
	for _, n := range b.cps {
		initDeps = append(initDeps, b.planes[n.Name].files.get(kubeadm.InitConfigPath)...)
	}
	initDeps = append(initDeps, b.revived)
	// Stacks made before the bootstrap was cluster-wide held it as the
	// first control-plane node's KubeadmInit.
	var aliases []pulumi.Alias
	for _, n := range b.cps {
		aliases = append(aliases, pulumi.Alias{Name: pulumi.String(n.Name), Parent: b.planes[n.Name]})
	}
	init, err := register(b.ctx, "KubeadmInit", b.inv.Cluster.Name, pulumi.Map{
		"connection": b.via,
		"configPath": pulumi.String(kubeadm.InitConfigPath),
		// The cluster-wide part only: which node bootstraps is no change
		// to the cluster's configuration.
		"configSha":       pulumi.String(sha(b.r.ClusterConfig)),
		"ignorePreflight": pulumi.ToStringArray(b.cfg.IgnorePreflight),
		"peers":           peersOf(b.cfg, b.cps, b.boot.Name),
	}, &KubeadmInitHandle{}, pulumi.Parent(b.cl), pulumi.DependsOn(initDeps),
		pulumi.Aliases(aliases),
		// cluster-admin credentials: encrypted in state, never shown.
		pulumi.AdditionalSecretOutputs([]string{"adminKubeconfig"}))
	b.init = init
	return err
}

// controlPlaneJoins: control-plane nodes become members one at a time, the
// bootstrap node first (its init made it one): each grows etcd by a
// member, and two at once can lose quorum while both are learners.
func (b *build) controlPlaneJoins() error {
	order := b.bootFirst()
	last := pulumi.Resource(b.init)
	for _, n := range order {
		j, err := declareJoin(b.ctx, b.planes[n.Name], b.cfg, b.r, n, b.via, peersOf(b.cfg, b.cps, n.Name),
			append([]pulumi.Resource{b.init, last}, b.fileDeps[n.Name]...))
		if err != nil {
			return err
		}
		b.planes[n.Name].Join = j
		last = j
		b.cpJoins = append(b.cpJoins, j)
	}
	for _, n := range b.cps {
		if err := declareNodeMeta(b.ctx, b.planes[n.Name], b.cfg, b.via, nodeOf(b.r, n.Name), []pulumi.Resource{b.planes[n.Name].Join}); err != nil {
			return err
		}
		if err := b.ctx.RegisterResourceOutputs(b.planes[n.Name], pulumi.Map{"node": pulumi.String(n.Name)}); err != nil {
			return err
		}
	}
	return nil
}

// workers join in parallel as soon as the bootstrap node serves the API,
// alongside the control-plane joins: a worker needs only the API through
// the endpoint, and adds no etcd member.
func (b *build) workers() error {
	b.joins = slices.Clone(b.cpJoins)
	for _, n := range b.inv.Workers() {
		pkg, err := declareRuntimePackages(b.ctx, b.workerOf[n.Name], b.cfg, n, connection(b.cfg, n), b.workerOf[n.Name].Host, b.runtimeDone())
		if err != nil {
			return err
		}
		b.runtimePkg = cmp.Or[pulumi.Resource](pkg, b.runtimePkg)
		w, err := newWorker(b.ctx, b.workerOf[n.Name], b.cfg, b.r, n, b.upgraded, pkg, b.via, peersOf(b.cfg, b.cps, ""), b.planes[b.boot.Name].Join, b.runtime)
		if err != nil {
			return err
		}
		if w.Runtime != nil {
			b.runtime = w.Runtime
		}
		b.joins = append(b.joins, w.Join)
	}
	return nil
}

// etcdMembership keeps etcd's member list equal to the control-plane nodes.
func (b *build) etcdMembership() error {
	var members, viaAll pulumi.Array
	for _, n := range slices.SortedFunc(slices.Values(b.cps), func(a, c inventory.Node) int { return strings.Compare(a.Name, c.Name) }) {
		members = append(members, pulumi.Map{"name": pulumi.String(n.Name), "peerURL": pulumi.String("https://" + net.JoinHostPort(n.Address, "2380"))})
		viaAll = append(viaAll, connection(b.cfg, n))
	}
	etcd, err := register(b.ctx, "EtcdMembers", "etcd", pulumi.Map{"via": viaAll, "members": members}, &EtcdMembersHandle{},
		pulumi.Parent(b.cl), pulumi.DependsOn(b.cpJoins))
	b.etcd = etcd
	return err
}

// controlPlaneAddresses come after etcd's membership: a re-addressed
// member's peer URL must be updated before its etcd restarts on the new
// address, or its peers could not reach it. One node at a time, each
// healthy again before the next, so etcd never loses quorum and the API
// stays served while each renews its certificates.
func (b *build) controlPlaneAddresses() error {
	apiSANs, etcdSANs := b.r.APIServerSANs.Strings(), b.r.EtcdSANs.Strings()
	componentArgs := pulumi.StringArrayMap{}
	for pod, args := range b.r.ComponentArgs {
		componentArgs[pod] = pulumi.ToStringArray(args)
	}
	prev := pulumi.Resource(b.etcd)
	for _, n := range b.cps {
		cp := b.planes[n.Name]
		deps := []pulumi.Resource{prev, cp.Join}
		deps = append(deps, cp.files.get(kubeadm.InitConfigPath)...)
		if cp.Keepalived != nil {
			deps = append(deps, cp.Keepalived)
		}
		a, err := register(b.ctx, "ControlPlaneAddress", n.Name, pulumi.Map{
			"connection":    connection(b.cfg, n),
			"address":       pulumi.String(n.Address),
			"apiServerSANs": pulumi.ToStringArray(apiSANs),
			"etcdSANs":      pulumi.ToStringArray(etcdSANs),
			"configPath":    pulumi.String(kubeadm.InitConfigPath),
			"port":          pulumi.Int(b.inv.Cluster.Endpoint.APIPort()),
			"componentArgs": componentArgs,
			"renewBefore":   pulumi.String(b.inv.Cluster.Certificates.RenewBefore),
			"endpoint":      pulumi.String(b.inv.Endpoint()),
		}, &ControlPlaneAddressHandle{}, pulumi.Parent(cp), pulumi.DependsOn(deps))
		if err != nil {
			return err
		}
		prev = a
	}
	b.settled = prev
	return nil
}

// kubeletServing: every kubelet serves with a certificate of the cluster
// CA, approved by up (infra/provider's KubeletServing). After the node's
// join, and after the control plane settled: a CSR is read and approved
// through the API, which a re-addressed or renewing control plane may not
// serve before, and nothing here may hold up the fix of those.
func (b *build) kubeletServing() error {
	for _, n := range b.inv.Nodes {
		var parent pulumi.Resource
		var join pulumi.Resource
		if cp, ok := b.planes[n.Name]; ok {
			parent, join = cp, cp.Join
		} else {
			w := b.workerOf[n.Name]
			parent, join = w, w.Join
		}
		_, err := register(b.ctx, "KubeletServing", n.Name, pulumi.Map{
			"connection": connection(b.cfg, n),
			"via":        b.via,
			"node":       pulumi.String(n.Name),
			"address":    pulumi.String(n.Address),
		}, &KubeletServingHandle{}, pulumi.Parent(parent), pulumi.DependsOn([]pulumi.Resource{join, b.settled}))
		if err != nil {
			return err
		}
	}
	return nil
}

// podNetwork once the control plane is complete and settled (every
// ControlPlaneAddress healthy): installing it reads and writes through the
// API, which a regenerated apiserver manifest restarts.
func (b *build) podNetwork() error {
	_, err := declareDataplane(b.ctx, b.cl, b.cfg, b.r, b.via, b.init, append(slices.Clone(b.joins), b.settled))
	return err
}

// clusterObjects applies the GPU objects (Cilium's values are for the
// Cilium installer); the device plugin's pods name the RuntimeClass.
func (b *build) clusterObjects() error {
	var runtimeClass []pulumi.Resource
	for _, path := range []string{gpu.RuntimeClassPath, gpu.DevicePluginPath} {
		f, ok := clusterFile(b.r, path)
		if !ok {
			continue
		}
		args := pulumi.Map{"via": b.via, "kind": pulumi.String("runtimeclass"), "name": pulumi.String(gpu.RuntimeClassName), "content": pulumi.String(string(f.Content))}
		name := "runtimeclass-" + gpu.RuntimeClassName
		if path == gpu.DevicePluginPath {
			args["kind"], args["name"], args["namespace"] = pulumi.String("daemonset"), pulumi.String(gpu.DevicePluginName), pulumi.String(gpu.DevicePluginNamespace)
			name = "nvidia-device-plugin"
		}
		m, err := register(b.ctx, "Manifest", name, args, &ManifestHandle{}, pulumi.Parent(b.cl), pulumi.DependsOn(append([]pulumi.Resource{b.init}, runtimeClass...)))
		if err != nil {
			return err
		}
		runtimeClass = append(runtimeClass, m)
	}
	return nil
}

func (b *build) outputs() error {
	cl := b.cl
	cl.Endpoint = pulumi.String(b.inv.Endpoint()).ToStringOutput()
	cl.Kubeconfig = pulumi.ToSecret(b.init.AdminKubeconfig).(pulumi.StringOutput)
	cl.EtcdMembers = b.etcd.Live
	cl.SANs = pulumi.ToStringArray(b.r.APIServerSANs.Strings()).ToStringArrayOutput()
	macs := pulumi.StringArrayMap{}
	for _, n := range b.inv.Nodes {
		if cp, ok := b.planes[n.Name]; ok {
			macs[n.Name] = cp.Host.MACs
		} else if w, ok := b.workerOf[n.Name]; ok {
			macs[n.Name] = w.Host.MACs
		}
	}
	cl.MACs = macs.ToStringArrayMapOutput()
	return b.ctx.RegisterResourceOutputs(cl, pulumi.Map{
		"endpoint":    cl.Endpoint,
		"kubeconfig":  cl.Kubeconfig,
		"etcdMembers": cl.EtcdMembers,
		"sans":        cl.SANs,
		"macs":        cl.MACs,
	})
}

// newControlPlane declares a control-plane node's packages and files after
// its Host and the upgrade, and keepalived after its Host alone (see
// early); the caller adds its init or join. It returns the node's files,
// which kubeadm needs in place first.
func newControlPlane(ctx *pulumi.Context, cp *ControlPlane, cfg Config, r *roles.Rendered, n inventory.Node, upgraded, runtimePkg pulumi.Resource, after []pulumi.Resource) (*ControlPlane, []pulumi.Resource, error) {
	conn := connection(cfg, n)
	ready, err := declareKubernetesPackages(ctx, cp, cfg, n, conn, cp.Host, upgraded)
	if err != nil {
		return nil, nil, err
	}
	if runtimePkg != nil {
		ready = append(ready, runtimePkg) // containerd's config.toml over the package's
	}
	offsite, err := etcdsnapshot.OffsiteFiles(cfg.Inventory.Cluster.Etcd.Snapshots, cfg.SnapshotsS3Keys, cfg.SnapshotsS3CA)
	if err != nil {
		return nil, nil, err
	}
	files := slices.Concat(filesOf(r, n.Name), offsite)
	// keepalived's files (and the CA its check verifies the API with) say
	// nothing of the Kubernetes version: they wait for this node's Host
	// alone, not for the cluster-wide upgrade and so every node's Host,
	// and the endpoint answers sooner. keepalived's restarts stay apart
	// from the upgrade's VIP hand-over by the provider's endpoint lock.
	var early []string
	if cfg.Inventory.Cluster.Endpoint.Layout == inventory.LayoutVIP {
		early = []string{keepalived.ConfigPath, keepalived.CheckScriptPath, keepalived.DropInPath, pki.CertificatesDir + "/ca.crt"}
	}
	nf, err := declareFiles(ctx, cp, conn, n.Name, keep(files, early, true), []pulumi.Resource{cp.Host})
	if err != nil {
		return nil, nil, err
	}
	if err := declareNetplan(ctx, cp, cfg, files, n, conn, cp.Host); err != nil {
		return nil, nil, err
	}
	rest, err := declareFiles(ctx, cp, conn, n.Name, keep(files, early, false), ready)
	if err != nil {
		return nil, nil, err
	}
	nf.add(rest)
	cp.files = nf
	if cfg.Inventory.Cluster.Endpoint.Layout == inventory.LayoutVIP {
		// The check script verifies TLS with the cluster CA. The drop-in
		// first: a keepalived started before systemd loads it would leave
		// its VIP behind if killed, and its daemon-reload would race the
		// restart.
		deps := append(nf.get(early...), after...)
		svc, err := register(ctx, "Service", n.Name+":keepalived", pulumi.Map{
			"connection": conn,
			"name":       pulumi.String(keepalived.Unit),
			"trigger":    pulumi.String(file.Trigger(files, keepalived.Unit)),
		}, &ServiceHandle{}, pulumi.Parent(cp), pulumi.DependsOn(deps))
		if err != nil {
			return nil, nil, err
		}
		cp.Keepalived = svc
	}
	if err := declareSnapshotTimer(ctx, cp, cfg, n, conn, files, nf); err != nil {
		return nil, nil, err
	}
	return cp, nf.all, nil
}

func clusterFile(r *roles.Rendered, path string) (file.File, bool) {
	for _, f := range r.Cluster {
		if f.Path == path {
			return f, true
		}
	}
	return file.File{}, false
}

// peersOf lists the connections of every control-plane node but one.
func peersOf(cfg Config, cps []inventory.Node, except string) pulumi.Array {
	var out pulumi.Array
	for _, n := range cps {
		if n.Name != except {
			out = append(out, connection(cfg, n))
		}
	}
	return out
}

func newWorker(ctx *pulumi.Context, w *Worker, cfg Config, r *roles.Rendered, n inventory.Node, upgraded, runtimePkg pulumi.Resource, via pulumi.Map, peers pulumi.Array, after, prevRuntime pulumi.Resource) (*Worker, error) {
	conn := connection(cfg, n)
	host := w.Host
	ready, err := declareKubernetesPackages(ctx, w, cfg, n, conn, host, upgraded)
	if err != nil {
		return nil, err
	}
	if runtimePkg != nil {
		ready = append(ready, runtimePkg) // containerd's config.toml over the package's
	}
	nf, err := declareFiles(ctx, w, conn, n.Name, filesOf(r, n.Name), ready)
	if err != nil {
		return nil, err
	}
	if err := declareNetplan(ctx, w, cfg, filesOf(r, n.Name), n, conn, host); err != nil {
		return nil, err
	}
	if w.Runtime, err = declareRuntime(ctx, w, cfg, n, conn, filesOf(r, n.Name), nf, prevRuntime); err != nil {
		return nil, err
	}
	deps := append([]pulumi.Resource{after}, nf.all...)
	if w.Runtime != nil {
		deps = append(deps, w.Runtime)
	}
	j, err := declareJoin(ctx, w, cfg, r, n, via, peers, deps)
	if err != nil {
		return nil, err
	}
	w.Join = j
	if err := declareNodeMeta(ctx, w, cfg, via, nodeOf(r, n.Name), []pulumi.Resource{j}); err != nil {
		return nil, err
	}
	if err := declareGPUWorker(ctx, w, cfg, r, n, conn, host, nf); err != nil {
		return nil, err
	}
	return w, ctx.RegisterResourceOutputs(w, pulumi.Map{"node": pulumi.String(n.Name)})
}

// declareJoin declares a node's membership: kubeadm join with its own
// token and its transient join config, or, on the node that bootstrapped
// the cluster, the init that already made it a member.
func declareJoin(ctx *pulumi.Context, parent pulumi.Resource, cfg Config, r *roles.Rendered, n inventory.Node, via pulumi.Map, peers pulumi.Array, deps []pulumi.Resource) (*KubeadmJoinHandle, error) {
	config := contentOf(filesOf(r, n.Name), kubeadm.JoinConfigPath)
	args := pulumi.Map{
		"connection":      connection(cfg, n),
		"configPath":      pulumi.String(kubeadm.JoinConfigPath),
		"configSha":       pulumi.String(sha(config)),
		"controlPlane":    pulumi.Bool(n.IsControlPlane()),
		"ignorePreflight": pulumi.ToStringArray(cfg.IgnorePreflight),
		"via":             via,
		"peers":           peers,
		"bootstrapToken":  pulumi.ToSecret(pulumi.String(cfg.Bundle.JoinToken(n.Name))).(pulumi.StringOutput),
	}
	// The single-ip layout's endpoint node has none: it cannot join
	// through itself.
	if config != nil {
		args["config"] = pulumi.ToSecret(pulumi.String(string(config))).(pulumi.StringOutput)
	}
	return register(ctx, "KubeadmJoin", n.Name, args, &KubeadmJoinHandle{}, pulumi.Parent(parent), pulumi.DependsOn(deps))
}
