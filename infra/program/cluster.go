package program

import (
	"net"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles"
	"github.com/homelab-dev/homelab/roles/file"
	"github.com/homelab-dev/homelab/roles/gpu"
	"github.com/homelab-dev/homelab/roles/keepalived"
	"github.com/homelab-dev/homelab/roles/kubeadm"
	"github.com/homelab-dev/homelab/roles/pki"
	"github.com/homelab-dev/homelab/roles/sans"
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
// its kubeadm init (the first) or control-plane join.
type ControlPlane struct {
	pulumi.ResourceState
	Host       *Host
	Keepalived *Service
	Init       *KubeadmInit
	Join       *KubeadmJoin
}

// Worker is one worker node: host, files, join, labels and taints.
type Worker struct {
	pulumi.ResourceState
	Host *Host
	Join *KubeadmJoin
}

// NewCluster declares the homelab's resources in the HA bootstrap order:
// hosts -> base files, CA files -> keepalived (the VIP answers before init)
// -> init on the first control-plane node -> other control-plane nodes join
// one at a time -> workers join in parallel -> labels, taints, RuntimeClass
// -> etcd membership.
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
	first := cps[0]
	via := connection(cfg, first)

	// Every control-plane node's keepalived runs before init, so the
	// endpoint answers while kubeadm bootstraps through it.
	planes := make([]*ControlPlane, len(cps))
	fileDeps := make([][]pulumi.Resource, len(cps))
	var keepaliveds []pulumi.Resource
	for i, n := range cps {
		// keepalived one node at a time: restarting every instance at
		// once (new peers after a re-address) would leave the VIP with
		// no holder for a few advert intervals.
		cp, deps, err := newControlPlane(ctx, cl, cfg, rendered, n, keepaliveds)
		if err != nil {
			return nil, err
		}
		planes[i], fileDeps[i] = cp, deps
		if cp.Keepalived != nil {
			keepaliveds = append(keepaliveds, cp.Keepalived)
		}
	}

	initFiles := filesOf(rendered, first.Name)
	initDeps := append(fileDeps[0], keepaliveds...)
	token := pulumi.ToSecret(pulumi.String(cfg.Bundle.BootstrapToken())).(pulumi.StringOutput)
	initArgs := pulumi.Map{
		"connection":      via,
		"configPath":      pulumi.String(kubeadm.InitConfigPath),
		"configSha":       pulumi.String(sha(contentOf(initFiles, kubeadm.InitConfigPath))),
		"ignorePreflight": pulumi.ToStringArray(cfg.IgnorePreflight),
		"peers":           peersOf(cfg, cps, first.Name),
		"bootstrapToken":  token,
	}
	if contentOf(initFiles, kubeadm.JoinConfigPath) != nil {
		initArgs["joinConfigPath"] = pulumi.String(kubeadm.JoinConfigPath)
	}
	init, err := register(ctx, "KubeadmInit", first.Name, initArgs, &KubeadmInit{}, pulumi.Parent(planes[0]), pulumi.DependsOn(initDeps),
		// cluster-admin credentials: encrypted in state, never shown.
		pulumi.AdditionalSecretOutputs([]string{"adminKubeconfig"}))
	if err != nil {
		return nil, err
	}
	planes[0].Init = init

	joinArgs := func(n inventory.Node, controlPlane bool) pulumi.Map {
		m := pulumi.Map{
			"connection":      connection(cfg, n),
			"configPath":      pulumi.String(kubeadm.JoinConfigPath),
			"configSha":       pulumi.String(sha(contentOf(filesOf(rendered, n.Name), kubeadm.JoinConfigPath))),
			"controlPlane":    pulumi.Bool(controlPlane),
			"ignorePreflight": pulumi.ToStringArray(cfg.IgnorePreflight),
			"via":             via,
			"bootstrapToken":  token,
		}
		if controlPlane {
			m["peers"] = peersOf(cfg, cps, n.Name)
		}
		return m
	}

	// Control-plane joins go one at a time: each grows etcd by a member,
	// and two at once can lose quorum while both are learners.
	last := pulumi.Resource(init)
	cpDone := []pulumi.Resource{init}
	for i := 1; i < len(cps); i++ {
		j, err := register(ctx, "KubeadmJoin", cps[i].Name, joinArgs(cps[i], true), &KubeadmJoin{},
			pulumi.Parent(planes[i]), pulumi.DependsOn(append([]pulumi.Resource{last}, fileDeps[i]...)))
		if err != nil {
			return nil, err
		}
		planes[i].Join = j
		last = j
		cpDone = append(cpDone, j)
	}
	for i, n := range cps {
		joined := []pulumi.Resource{cpDone[i]}
		if err := declareNodeMeta(ctx, planes[i], cfg, via, n, joined); err != nil {
			return nil, err
		}
		if err := ctx.RegisterResourceOutputs(planes[i], pulumi.Map{"node": pulumi.String(n.Name)}); err != nil {
			return nil, err
		}
	}

	// Workers join in parallel once every control-plane node is in.
	joins := append([]pulumi.Resource{}, cpDone...)
	for _, n := range inv.Workers() {
		w, err := newWorker(ctx, cl, cfg, rendered, n, via, joinArgs(n, false), last)
		if err != nil {
			return nil, err
		}
		joins = append(joins, w.Join)
	}

	var members pulumi.Array
	var viaAll pulumi.Array
	for _, n := range cps {
		members = append(members, pulumi.Map{"name": pulumi.String(n.Name), "peerURL": pulumi.String("https://" + net.JoinHostPort(n.Address, "2380"))})
		viaAll = append(viaAll, connection(cfg, n))
	}
	etcd, err := register(ctx, "EtcdMembers", "etcd", pulumi.Map{"via": viaAll, "members": members}, &EtcdMembers{},
		pulumi.Parent(cl), pulumi.DependsOn(cpDone))
	if err != nil {
		return nil, err
	}

	// After etcd's membership: a re-addressed member's peer URL must be
	// updated before its etcd restarts on the new address, or its peers
	// could not reach it. One node at a time, each healthy again before the
	// next, so etcd never loses quorum.
	apiSANs, etcdSANs := rendered.APIServerSANs.Strings(), sans.Etcd(inv).Strings()
	hash, err := cfg.Bundle.CACertHash()
	if err != nil {
		return nil, err
	}
	componentArgs := pulumi.StringArrayMap{}
	for pod, args := range kubeadm.ComponentArgs(kubeadm.Cluster(inv, rendered.APIServerSANs, sans.Etcd(inv))) {
		componentArgs[pod] = pulumi.ToStringArray(args)
	}
	prev := pulumi.Resource(etcd)
	for i, n := range cps {
		phases, err := kubeadm.Init(inv, n, kubeadm.Secrets{BootstrapToken: cfg.Bundle.BootstrapToken(), CACertHash: hash}, rendered.APIServerSANs, sans.Etcd(inv))
		if err != nil {
			return nil, err
		}
		deps := []pulumi.Resource{prev, cpDone[i]}
		if planes[i].Keepalived != nil {
			deps = append(deps, planes[i].Keepalived)
		}
		a, err := register(ctx, "ControlPlaneAddress", n.Name, pulumi.Map{
			"connection":    connection(cfg, n),
			"address":       pulumi.String(n.Address),
			"apiServerSANs": pulumi.ToStringArray(apiSANs),
			"etcdSANs":      pulumi.ToStringArray(etcdSANs),
			"config":        pulumi.ToSecret(pulumi.String(string(phases))).(pulumi.StringOutput),
			"port":          pulumi.Int(inv.Cluster.Endpoint.Port),
			"componentArgs": componentArgs,
		}, &ControlPlaneAddress{}, pulumi.Parent(planes[i]), pulumi.DependsOn(deps))
		if err != nil {
			return nil, err
		}
		prev = a
	}

	// The pod network once the control plane is complete and settled
	// (every ControlPlaneAddress healthy): installing it reads and writes
	// through the API, which a regenerated apiserver manifest restarts.
	if _, err := declareDataplane(ctx, cl, cfg, via, init, append(joins, prev)); err != nil {
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
		m, err := register(ctx, "Manifest", name, args, &Manifest{}, pulumi.Parent(cl), pulumi.DependsOn(append([]pulumi.Resource{init}, runtimeClass...)))
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
	if cfg.Inventory.Cluster.Endpoint.Layout == inventory.LayoutVIP {
		// The check script verifies TLS with the cluster CA.
		deps := append(nf.get(keepalived.ConfigPath, keepalived.CheckScriptPath, pki.CertificatesDir+"/ca.crt"), after...)
		svc, err := register(ctx, "Service", n.Name+":keepalived", pulumi.Map{
			"connection": conn,
			"name":       pulumi.String("keepalived"),
			"trigger":    pulumi.String(keepalivedTrigger(files)),
		}, &Service{}, pulumi.Parent(cp), pulumi.DependsOn(deps))
		if err != nil {
			return nil, nil, err
		}
		cp.Keepalived = svc
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

func newWorker(ctx *pulumi.Context, parent pulumi.Resource, cfg Config, r *roles.Rendered, n inventory.Node, via, joinArgs pulumi.Map, after pulumi.Resource) (*Worker, error) {
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
	j, err := register(ctx, "KubeadmJoin", n.Name, joinArgs, &KubeadmJoin{}, pulumi.Parent(w),
		pulumi.DependsOn(append([]pulumi.Resource{after}, nf.all...)))
	if err != nil {
		return nil, err
	}
	w.Join = j
	if err := declareNodeMeta(ctx, w, cfg, via, n, []pulumi.Resource{j}); err != nil {
		return nil, err
	}
	if err := declareGPUWorker(ctx, w, cfg, r, n, conn, host, nf); err != nil {
		return nil, err
	}
	return w, ctx.RegisterResourceOutputs(w, pulumi.Map{"node": pulumi.String(n.Name)})
}
