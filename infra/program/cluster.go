package program

import (
	"net"
	"slices"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles"
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
}

// ControlPlane is one control-plane node: its host, files, keepalived and
// its membership (a control-plane join, or the init that made it one).
type ControlPlane struct {
	pulumi.ResourceState
	Host       *HostHandle
	Keepalived *ServiceHandle
	Join       *KubeadmJoinHandle
	files      *nodeFiles
}

// Worker is one worker node: host, files, join, labels and taints.
type Worker struct {
	pulumi.ResourceState
	Host *HostHandle
	Join *KubeadmJoinHandle
}

// NewCluster declares the homelab's resources in the HA bootstrap order:
// hosts -> base files, CA files -> keepalived (the VIP answers before init)
// -> the cluster bootstrapped (kubeadm init on one control-plane node, once)
// -> every control-plane node a member, one at a time; workers join in
// parallel, alongside, once the bootstrap node serves the API -> labels,
// taints, RuntimeClass -> etcd membership.
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
	inv := cfg.Inventory
	rendered, err := roles.Render(inv, cfg.Bundle)
	if err != nil {
		return nil, err
	}
	cps := inv.ControlPlanes()
	boot := inv.Bootstrap()
	via := connection(cfg, boot)

	// Every control-plane node's keepalived runs before init, so the
	// endpoint answers while kubeadm bootstraps through it.
	planes := map[string]*ControlPlane{}
	fileDeps := map[string][]pulumi.Resource{}
	var keepaliveds []pulumi.Resource
	for _, n := range cps {
		// keepalived one node at a time: restarting every instance at
		// once (new peers after a re-address) would leave the VIP with
		// no holder for a few advert intervals.
		cp, deps, err := newControlPlane(ctx, cl, cfg, rendered, n, keepaliveds)
		if err != nil {
			return nil, err
		}
		planes[n.Name], fileDeps[n.Name] = cp, deps
		if cp.Keepalived != nil {
			keepaliveds = append(keepaliveds, cp.Keepalived)
		}
	}

	// The bootstrap node's files, every keepalived (the endpoint answers),
	// and every node's init config: the cluster config is uploaded through
	// whichever node the cluster runs on.
	initDeps := append(slices.Clone(fileDeps[boot.Name]), keepaliveds...)
	for _, n := range cps {
		initDeps = append(initDeps, planes[n.Name].files.get(kubeadm.InitConfigPath)...)
	}
	// Stacks made before the bootstrap was cluster-wide held it as the
	// first control-plane node's KubeadmInit.
	var aliases []pulumi.Alias
	for _, n := range cps {
		aliases = append(aliases, pulumi.Alias{Name: pulumi.String(n.Name), Parent: planes[n.Name]})
	}
	init, err := register(ctx, "KubeadmInit", inv.Cluster.Name, pulumi.Map{
		"connection": via,
		"configPath": pulumi.String(kubeadm.InitConfigPath),
		// The cluster-wide part only: which node bootstraps is no change
		// to the cluster's configuration.
		"configSha":       pulumi.String(sha(rendered.ClusterConfig)),
		"ignorePreflight": pulumi.ToStringArray(cfg.IgnorePreflight),
		"peers":           peersOf(cfg, cps, boot.Name),
	}, &KubeadmInitHandle{}, pulumi.Parent(cl), pulumi.DependsOn(initDeps),
		pulumi.Aliases(aliases),
		// cluster-admin credentials: encrypted in state, never shown.
		pulumi.AdditionalSecretOutputs([]string{"adminKubeconfig"}))
	if err != nil {
		return nil, err
	}

	// Control-plane nodes become members one at a time, the bootstrap node
	// first (its init made it one): each grows etcd by a member, and two at
	// once can lose quorum while both are learners.
	order := append([]inventory.Node{boot}, slices.DeleteFunc(slices.Clone(cps), func(n inventory.Node) bool { return n.Name == boot.Name })...)
	last := pulumi.Resource(init)
	var cpDone []pulumi.Resource
	for _, n := range order {
		j, err := declareJoin(ctx, planes[n.Name], cfg, rendered, n, via, peersOf(cfg, cps, n.Name),
			append([]pulumi.Resource{init, last}, fileDeps[n.Name]...))
		if err != nil {
			return nil, err
		}
		planes[n.Name].Join = j
		last = j
		cpDone = append(cpDone, j)
	}
	for _, n := range cps {
		if err := declareNodeMeta(ctx, planes[n.Name], cfg, via, nodeOf(rendered, n.Name), []pulumi.Resource{planes[n.Name].Join}); err != nil {
			return nil, err
		}
		if err := ctx.RegisterResourceOutputs(planes[n.Name], pulumi.Map{"node": pulumi.String(n.Name)}); err != nil {
			return nil, err
		}
	}

	// Workers join in parallel as soon as the bootstrap node serves the
	// API, alongside the control-plane joins: a worker needs only the API
	// through the endpoint, and adds no etcd member.
	joins := slices.Clone(cpDone)
	for _, n := range inv.Workers() {
		w, err := newWorker(ctx, cl, cfg, rendered, n, via, peersOf(cfg, cps, ""), planes[boot.Name].Join)
		if err != nil {
			return nil, err
		}
		joins = append(joins, w.Join)
	}

	var members pulumi.Array
	var viaAll pulumi.Array
	for _, n := range slices.SortedFunc(slices.Values(cps), func(a, b inventory.Node) int { return strings.Compare(a.Name, b.Name) }) {
		members = append(members, pulumi.Map{"name": pulumi.String(n.Name), "peerURL": pulumi.String("https://" + net.JoinHostPort(n.Address, "2380"))})
		viaAll = append(viaAll, connection(cfg, n))
	}
	etcd, err := register(ctx, "EtcdMembers", "etcd", pulumi.Map{"via": viaAll, "members": members}, &EtcdMembersHandle{},
		pulumi.Parent(cl), pulumi.DependsOn(cpDone))
	if err != nil {
		return nil, err
	}

	// After etcd's membership: a re-addressed member's peer URL must be
	// updated before its etcd restarts on the new address, or its peers
	// could not reach it. One node at a time, each healthy again before the
	// next, so etcd never loses quorum.
	apiSANs, etcdSANs := rendered.APIServerSANs.Strings(), rendered.EtcdSANs.Strings()
	componentArgs := pulumi.StringArrayMap{}
	for pod, args := range rendered.ComponentArgs {
		componentArgs[pod] = pulumi.ToStringArray(args)
	}
	prev := pulumi.Resource(etcd)
	for _, n := range cps {
		deps := []pulumi.Resource{prev, planes[n.Name].Join}
		deps = append(deps, planes[n.Name].files.get(kubeadm.InitConfigPath)...)
		if planes[n.Name].Keepalived != nil {
			deps = append(deps, planes[n.Name].Keepalived)
		}
		a, err := register(ctx, "ControlPlaneAddress", n.Name, pulumi.Map{
			"connection":    connection(cfg, n),
			"address":       pulumi.String(n.Address),
			"apiServerSANs": pulumi.ToStringArray(apiSANs),
			"etcdSANs":      pulumi.ToStringArray(etcdSANs),
			"configPath":    pulumi.String(kubeadm.InitConfigPath),
			"port":          pulumi.Int(inv.Cluster.Endpoint.Port),
			"componentArgs": componentArgs,
		}, &ControlPlaneAddressHandle{}, pulumi.Parent(planes[n.Name]), pulumi.DependsOn(deps))
		if err != nil {
			return nil, err
		}
		prev = a
	}

	// The pod network once the control plane is complete and settled
	// (every ControlPlaneAddress healthy): installing it reads and writes
	// through the API, which a regenerated apiserver manifest restarts.
	if _, err := declareDataplane(ctx, cl, cfg, rendered, via, init, append(joins, prev)); err != nil {
		return nil, err
	}

	// Cilium's values are for the Cilium installer; the GPU objects are
	// applied here. The device plugin's pods name the RuntimeClass.
	var runtimeClass []pulumi.Resource
	for _, path := range []string{gpu.RuntimeClassPath, gpu.DevicePluginPath} {
		f, ok := clusterFile(rendered, path)
		if !ok {
			continue
		}
		args := pulumi.Map{"via": via, "kind": pulumi.String("runtimeclass"), "name": pulumi.String(gpu.RuntimeClassName), "content": pulumi.String(string(f.Content))}
		name := "runtimeclass-" + gpu.RuntimeClassName
		if path == gpu.DevicePluginPath {
			args["kind"], args["name"], args["namespace"] = pulumi.String("daemonset"), pulumi.String(gpu.DevicePluginName), pulumi.String(gpu.DevicePluginNamespace)
			name = "nvidia-device-plugin"
		}
		m, err := register(ctx, "Manifest", name, args, &ManifestHandle{}, pulumi.Parent(cl), pulumi.DependsOn(append([]pulumi.Resource{init}, runtimeClass...)))
		if err != nil {
			return nil, err
		}
		runtimeClass = append(runtimeClass, m)
	}

	cl.Endpoint = pulumi.String(inv.Endpoint()).ToStringOutput()
	cl.Kubeconfig = pulumi.ToSecret(init.AdminKubeconfig).(pulumi.StringOutput)
	cl.EtcdMembers = etcd.Live
	cl.SANs = pulumi.ToStringArray(rendered.APIServerSANs.Strings()).ToStringArrayOutput()
	return cl, ctx.RegisterResourceOutputs(cl, pulumi.Map{
		"endpoint":    cl.Endpoint,
		"kubeconfig":  cl.Kubeconfig,
		"etcdMembers": cl.EtcdMembers,
		"sans":        cl.SANs,
	})
}

// newControlPlane declares a control-plane node up to its keepalived; the
// caller adds its init or join. It returns the node's files, which kubeadm
// needs in place first.
func newControlPlane(ctx *pulumi.Context, parent pulumi.Resource, cfg Config, r *roles.Rendered, n inventory.Node, after []pulumi.Resource) (*ControlPlane, []pulumi.Resource, error) {
	cp := &ControlPlane{}
	if err := ctx.RegisterComponentResource("homelab:cluster:ControlPlane", n.Name, cp, pulumi.Parent(parent)); err != nil {
		return nil, nil, err
	}
	conn := connection(cfg, n)
	host, err := declareHost(ctx, cp, cfg, n, conn)
	if err != nil {
		return nil, nil, err
	}
	cp.Host = host
	files := filesOf(r, n.Name)
	nf, err := declareFiles(ctx, cp, conn, n.Name, files, host)
	if err != nil {
		return nil, nil, err
	}
	cp.files = nf
	if cfg.Inventory.Cluster.Endpoint.Layout == inventory.LayoutVIP {
		// The check script verifies TLS with the cluster CA.
		deps := append(nf.get(keepalived.ConfigPath, keepalived.CheckScriptPath, pki.CertificatesDir+"/ca.crt"), after...)
		svc, err := register(ctx, "Service", n.Name+":keepalived", pulumi.Map{
			"connection": conn,
			"name":       pulumi.String("keepalived"),
			"trigger":    pulumi.String(file.Trigger(files, keepalived.Unit)),
		}, &ServiceHandle{}, pulumi.Parent(cp), pulumi.DependsOn(deps))
		if err != nil {
			return nil, nil, err
		}
		cp.Keepalived = svc
	}
	if err := declareSnapshotTimer(ctx, cp, conn, n.Name, files, nf); err != nil {
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

func newWorker(ctx *pulumi.Context, parent pulumi.Resource, cfg Config, r *roles.Rendered, n inventory.Node, via pulumi.Map, peers pulumi.Array, after pulumi.Resource) (*Worker, error) {
	w := &Worker{}
	if err := ctx.RegisterComponentResource("homelab:cluster:Worker", n.Name, w, pulumi.Parent(parent)); err != nil {
		return nil, err
	}
	conn := connection(cfg, n)
	host, err := declareHost(ctx, w, cfg, n, conn)
	if err != nil {
		return nil, err
	}
	w.Host = host
	nf, err := declareFiles(ctx, w, conn, n.Name, filesOf(r, n.Name), host)
	if err != nil {
		return nil, err
	}
	j, err := declareJoin(ctx, w, cfg, r, n, via, peers, append([]pulumi.Resource{after}, nf.all...))
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
