package provider

import (
	"context"
	"crypto/x509"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/apiprobe"
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
// that differ, whether or not the files exist.
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
}

func (c *ControlPlaneAddress) Annotate(a infer.Annotator) {
	a.Describe(&c, "A control-plane node's address as kubeadm baked it in (manifests, kubeconfigs, node IP) and its certificates' SANs, kept equal to the inventory.")
	a.SetToken("index", "ControlPlaneAddress")
}

func (in ControlPlaneAddressArgs) configPath() string {
	if in.ConfigPath == "" {
		return kubeadm.InitConfigPath
	}
	return in.ConfigPath
}

func readLive(ctx context.Context, c ssh.Executor, st *ControlPlaneAddressState) error {
	out, _, err := query(ctx, c, nodefacts.ProbeScript)
	if err != nil {
		return err
	}
	setLive(st, nodefacts.ParseProbe(out))
	return nil
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
	st, err := convergeAddress(ctx, in)
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
		return st, readLive(ctx, c, &st)
	})
	if err != nil {
		return infer.ReadResponse[ControlPlaneAddressArgs, ControlPlaneAddressState]{}, err
	}
	return infer.ReadResponse[ControlPlaneAddressArgs, ControlPlaneAddressState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
}

// addressChanges compares the inventory with what the node has, not with
// the last inputs: the point is drift kubeadm left behind. Update fixes
// whatever driftOf finds when it runs, reading the node again first.
func addressChanges(in ControlPlaneAddressArgs, st ControlPlaneAddressState) changeSet {
	d := changeSet{}
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
	return addressChanges(req.Inputs, req.State).diff(false), nil
}

func (ControlPlaneAddress) Update(ctx context.Context, req infer.UpdateRequest[ControlPlaneAddressArgs, ControlPlaneAddressState]) (infer.UpdateResponse[ControlPlaneAddressState], error) {
	st := req.State
	st.ControlPlaneAddressArgs = req.Inputs
	if req.DryRun {
		return infer.UpdateResponse[ControlPlaneAddressState]{Output: st}, nil
	}
	st, err := convergeAddress(ctx, req.Inputs)
	return infer.UpdateResponse[ControlPlaneAddressState]{Output: st}, err
}

// Delete changes nothing: the node's reset belongs to its init or join.
func (ControlPlaneAddress) Delete(ctx context.Context, req infer.DeleteRequest[ControlPlaneAddressState]) (infer.DeleteResponse, error) {
	return infer.DeleteResponse{}, nil
}

// convergeAddress reads the node and fixes what differs. The node's etcd member
// must already carry the new peer URL (EtcdMembers runs first): otherwise
// the restarted member could not be reached by its peers and would never
// become healthy. It returns once this node's etcd and apiserver are
// healthy again, so the next control-plane node is touched only then and
// etcd never loses more than one member at a time.
func convergeAddress(ctx context.Context, in ControlPlaneAddressArgs) (ControlPlaneAddressState, error) {
	st := ControlPlaneAddressState{ControlPlaneAddressArgs: in}
	node := in.Connection.Node
	c, err := dial(ctx, in.Connection)
	if err != nil {
		return st, err
	}
	defer c.Close()
	if err := readLive(ctx, c, &st); err != nil {
		return st, err
	}
	dr := driftOf(in, st)
	if len(dr.problems) == 0 {
		return st, nil
	}
	p.GetLogger(ctx).Infof("%s: %s", node, strings.Join(dr.problems, "; "))
	cfg := " --config " + quote(in.configPath())

	if len(dr.certs) > 0 {
		if _, err := mustFinish(ctx, c, node, "regenerating "+strings.Join(dr.certs, ", "), regenerateCerts(in.configPath(), dr.certs)); err != nil {
			return st, err
		}
	}
	// Flags the cluster config declares and a manifest lacks: kubeadm
	// regenerates the whole manifest from the config (volumes included).
	// The address fix below regenerates the apiserver's itself.
	for _, pod := range dr.pods {
		if pod == "kube-apiserver" && dr.address {
			continue
		}
		if _, err := mustFinish(ctx, c, node, "regenerating "+pod+"'s manifest", "kubeadm init phase control-plane "+nodefacts.ComponentPhase[pod]+cfg); err != nil {
			return st, err
		}
	}
	if dr.address {
		old := st.LiveAdvertise
		if old == "" {
			old = st.LiveEtcdPeer
		}
		script := "set -e\n" +
			"kubeadm init phase etcd local" + cfg + "\n" +
			"kubeadm init phase control-plane apiserver" + cfg + "\n"
		if old != "" && old != in.Address {
			// kubeconfigs of the node's own components and the kubelet's
			// node IP: rewritten in place, keeping their credentials.
			o, n := strings.ReplaceAll(old, ".", `\.`), in.Address
			for _, f := range nodefacts.OwnKubeconfigs {
				script += "[ -f " + f + " ] && sed -i 's#https://" + o + ":#https://" + n + ":#' " + f + "\n"
			}
			script += "[ -f " + nodefacts.KubeletFlagsEnv + " ] && sed -i 's#--node-ip=" + o + "\\b#--node-ip=" + n + "#' " + nodefacts.KubeletFlagsEnv + "\n"
		}
		// The kubelet rereads its flags and kubeconfig only on a restart;
		// the controller-manager and scheduler their kubeconfigs likewise:
		// their manifests did not change, so the kubelet restarts them
		// once they exit.
		script += "systemctl restart kubelet\n" +
			"pkill -x kube-controller-manager || true\npkill -x kube-scheduler || true\n"
		if _, err := mustFinish(ctx, c, node, "moving the control plane to "+in.Address, script); err != nil {
			return st, err
		}
	}
	if err := waitHealthy(ctx, c, in, len(dr.certs) > 0 && !dr.address && !slices.Contains(dr.pods, "kube-apiserver")); err != nil {
		return st, fmt.Errorf("%s: %w", node, err)
	}
	if err := readLive(ctx, c, &st); err != nil {
		return st, err
	}
	if left := driftOf(in, st); len(left.problems) > 0 {
		return st, fmt.Errorf("%s: still differs after the fix: %s", node, strings.Join(left.problems, "; "))
	}
	return st, nil
}

// waitHealthy waits for this node's etcd member and for its apiserver to
// serve /readyz with a certificate valid for the node's address. The
// apiserver reloads a regenerated serving certificate by itself; when it
// has not after a while (certsOnly: nothing restarted it), it is
// restarted.
func waitHealthy(ctx context.Context, c ssh.Executor, in ControlPlaneAddressArgs, certsOnly bool) error {
	caPEM, err := c.Read(ctx, nodefacts.CACert)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	port := in.Port
	if port == 0 {
		port = 6443
	}
	// Verified for the node's own address: a certificate lacking it fails.
	readyz := apiprobe.Readyz{CA: pool, Dial: c.DialContext}
	addr := net.JoinHostPort(in.Address, strconv.Itoa(port))
	deadline := time.Now().Add(4 * time.Minute)
	restartAt := time.Now().Add(30 * time.Second)
	var lastEtcd, lastAPI error
	for time.Now().Before(deadline) {
		if lastEtcd = etcdHealthy(ctx, c); lastEtcd == nil {
			if lastAPI = readyz.Check(ctx, addr); lastAPI == nil {
				return nil
			}
		}
		if certsOnly && time.Now().After(restartAt) {
			p.GetLogger(ctx).Warningf("%s: the apiserver still serves its old certificate; restarting it", in.Connection.Node)
			_, _ = c.Run(ctx, "pkill -x kube-apiserver || true")
			certsOnly = false
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	return fmt.Errorf("not healthy after the change: etcd: %v; apiserver: %v", lastEtcd, lastAPI)
}

func etcdHealthy(ctx context.Context, c ssh.Executor) error {
	cli, err := etcdThrough(ctx, c)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := cli.Status(ctx, "https://127.0.0.1:2379")
	if err != nil {
		return err
	}
	if s.Leader == 0 {
		return fmt.Errorf("etcd member has no leader")
	}
	if len(s.Errors) > 0 {
		return fmt.Errorf("etcd: %v", s.Errors)
	}
	return nil
}

// regenerateCerts issues new certificates with kubeadm in a staging
// directory holding only the CAs (kubeadm keeps an existing certificate
// whatever its SANs, so it must not see the old ones), then moves each
// pair into place. The running etcd and apiserver never find a
// certificate missing: both reload theirs from the files by themselves.
func regenerateCerts(config string, certs []string) string {
	script := `set -e
pki=` + nodefacts.PKIDir + `
t=$(mktemp -d /etc/kubernetes/.homelab-pki.XXXXXX)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/etcd"
cp -p $pki/ca.crt $pki/ca.key "$t/"
cp -p $pki/etcd/ca.crt $pki/etcd/ca.key "$t/etcd/"
sed "s#^certificatesDir: .*#certificatesDir: $t#" ` + quote(config) + ` > "$t/config.yaml"
`
	for _, f := range certs {
		base := strings.TrimSuffix(f, ".crt")
		sc, _ := nodefacts.ServingCertOf(f)
		script += "kubeadm init phase certs " + sc.Phase + ` --config "$t/config.yaml"` + "\n" +
			`mv -f "$t/` + base + `.key" $pki/` + base + ".key\n" +
			`mv -f "$t/` + base + `.crt" $pki/` + base + ".crt\n"
	}
	return script
}
