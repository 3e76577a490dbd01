package etcdbackup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/homelab-dev/homelab/infra/etcdclient"
	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/nodeprobes"
	"github.com/homelab-dev/homelab/roles/nodefacts"
	"github.com/homelab-dev/homelab/roles/pki"
)

// Paths on a node the restore uses.
const (
	manifestDir = nodefacts.ManifestsDir
	// AsideDir holds the control plane's static pod manifests while a
	// restore runs: the kubelet stops the pods, and nothing of the lost
	// cluster starts again on its own.
	AsideDir = nodefacts.RestoreAsideDir
	// BeforeRestoreDir keeps the etcd data each restore replaced on a
	// node, one timestamped directory per restore: nothing is deleted
	// without a trace, and a second restore (a --force after a first that
	// went wrong) never takes the first one's.
	BeforeRestoreDir = "/var/lib/homelab/etcd-before-restore"
	adminConf        = nodefacts.AdminConf
	upload           = "/var/lib/homelab/etcd-restore.tgz"
)

// controlPlanePods start with etcd, which the others need.
var controlPlanePods = nodefacts.ControlPlaneComponents

// RestoreOptions says what to restore and where.
type RestoreOptions struct {
	// From is a snapshot file; FromData a control-plane node whose etcd
	// member's raw db is restored instead (no snapshot needed).
	From, FromData string
	// Node is where the new cluster starts: default the most up-to-date
	// reachable control-plane node (FromData's, with FromData).
	Node string
	// Force restores though a quorum of healthy members exists.
	Force bool
	// Work is a local directory for the restored data (default a
	// temporary one).
	Work string
}

// RestoreReport is what a restore did.
type RestoreReport struct {
	Source   string
	Revision int64
	// OldClusterIDs are the IDs the live members had (those that
	// answered), NewClusterID the restored cluster's.
	OldClusterIDs []string
	NewClusterID  string
	Node          string
	// Readded are the control-plane nodes re-added as fresh members;
	// Rejoin those up must join (blank, replaced or half set up; their
	// stale Node objects were deleted); Unreachable were not touched:
	// their etcd members belong to the lost cluster, which the new one
	// refuses, until homelab etcd rejoin (or a new disk and up).
	Readded, Rejoin, Unreachable []string
	Members                      []Member
	Took                         time.Duration
	// Seeded: every reachable control-plane node was blank; the data
	// waits on Node, marked set up, for up to start the control plane
	// over it (Rejoin then lists every other control-plane node).
	Seeded bool
}

// nodeState is what the restore found on a reachable control-plane node.
type nodeState struct {
	*node
	files map[string]bool
	// manifest is the node's etcd manifest (in place or set aside by an
	// interrupted restore); nil when it has none.
	manifest []byte
	flags    map[string]string
	health   *Health
}

func (s *nodeState) member() bool {
	return s.manifest != nil && (s.files[nodefacts.InitMarker] || s.files[nodefacts.JoinMarker])
}

func (s *nodeState) peerURL() string { return s.flags["initial-advertise-peer-urls"] }

// blank: the node holds no trace of a control plane, no etcd data
// among them: a machine whose disk was replaced.
func (s *nodeState) blank() bool {
	for _, f := range s.files {
		if f {
			return false
		}
	}
	return true
}

// probe is read-only: which of the files a restore decides by exist.
var probe = nodeprobes.Presence(append(nodefacts.Files(nodefacts.Manifest(nodefacts.Etcd), AsideDir+"/etcd.yaml", nodefacts.InitMarker, nodefacts.JoinMarker, adminConf),
	nodefacts.Trace{Path: nodefacts.EtcdWALDir, Kind: nodefacts.Dir})...)

func (t Target) probe(ctx context.Context, n *node) (*nodeState, error) {
	r, err := n.c.Query(ctx, probe.String())
	if err != nil {
		return nil, err
	}
	s := &nodeState{node: n, files: nodefacts.ParsePresence(string(r.Stdout))}
	for _, p := range []string{manifestDir + "/etcd.yaml", AsideDir + "/etcd.yaml"} {
		if s.files[p] {
			if s.manifest, err = n.c.Read(ctx, p); err != nil {
				return nil, err
			}
			if s.flags, err = etcdFlags(s.manifest); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", n.Name, p, err)
			}
			break
		}
	}
	if s.files[manifestDir+"/etcd.yaml"] {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if cli, err := etcdclient.ThroughSSH(cctx, n.c); err == nil {
			if h, err := MemberHealth(cctx, cli); err == nil {
				s.health = &h
			}
			cli.Close()
		}
	}
	return s, nil
}

// Restore brings a cluster that lost etcd's quorum back from a snapshot
// (or a member's raw db): every check first, and a refusal changes
// nothing; then the control plane stopped on every reachable
// control-plane node, the data restored on one as a new one-member cluster
// with a new cluster ID (the PKI kept), started with the apiserver until
// the endpoint answers through it, and the other set-up control-plane
// nodes re-added one at a time as fresh members (data moved aside,
// member add as learner, the joining manifest, promotion). Nodes it
// cannot re-add so (blank, replaced, half set up) are left to up's join,
// their stale Node objects deleted so it is not refused.
func Restore(ctx context.Context, t Target, o RestoreOptions) (*RestoreReport, error) {
	start := time.Now()
	if (o.From == "") == (o.FromData == "") {
		return nil, errors.New("name what to restore: --from SNAPSHOT or --from-data NODE")
	}
	for _, name := range []string{o.FromData, o.Node} {
		if name == "" {
			continue
		}
		if n, ok := t.Inventory.Node(name); !ok || !n.IsControlPlane() {
			return nil, fmt.Errorf("%s is not a control-plane node of the inventory", name)
		}
	}
	want, err := t.pins()
	if err != nil {
		return nil, err
	}
	work := o.Work
	if work == "" {
		if work, err = os.MkdirTemp("", "homelab-restore-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(work)
	}
	rep := &RestoreReport{}

	// The snapshot first: a bad file is refused before any node is asked.
	var snap *Status
	var meta *Metadata
	var problems []error
	if o.From != "" {
		rep.Source = o.From
		snap, meta, err = t.checkSnapshot(o.From, want)
		if errors.Is(err, ErrNotSnapshot) || errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		if err != nil {
			problems = append(problems, err)
		}
	}

	nodes := t.connect(ctx)
	defer closeAll(nodes)
	var states []*nodeState
	for _, n := range nodes {
		if n.c == nil {
			rep.Unreachable = append(rep.Unreachable, n.Name)
			t.logf("%s: unreachable (%v): left as it is", n.Name, n.err)
			continue
		}
		if _, err := sameCAs(ctx, n, want); err != nil {
			problems = append(problems, err)
			continue
		}
		s, err := t.probe(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.Name, err)
		}
		states = append(states, s)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("nothing was changed: %w", errors.Join(problems...))
	}
	if err := t.quorumLost(ctx, states, len(nodes), o.Force, rep); err != nil {
		return nil, err
	}
	history, err := readHistory(t.History)
	if err != nil {
		return nil, err
	}
	if meta != nil && meta.ClusterID != "" {
		known := history.ids()
		for _, id := range rep.OldClusterIDs {
			if !contains(known, id) {
				known = append(known, id)
			}
		}
		if len(known) > 0 && !contains(known, meta.ClusterID) {
			return nil, fmt.Errorf("%s is a snapshot of etcd cluster %s, and this cluster has been %s: a snapshot of another cluster",
				o.From, meta.ClusterID, strings.Join(known, ", "))
		}
	}
	if seed := t.seedTarget(states, o); seed != nil {
		return t.seed(ctx, seed, snap, o, rep, start)
	}
	target, err := pickTarget(states, o)
	if err != nil {
		return nil, err
	}
	rawPath := ""
	if o.FromData != "" {
		rep.Source = o.FromData + ":" + filepath.Join(target.flags["data-dir"], "member/snap/db")
		rawPath = filepath.Join(work, "db")
		if snap, err = t.copyRawDB(ctx, target, rawPath, want); err != nil {
			return nil, err
		}
	}
	rep.Node, rep.Revision = target.Name, snap.Revision
	b := Bootstrap{Name: target.flags["name"], PeerURL: target.peerURL(), Token: fmt.Sprintf("homelab-restore-%d", time.Now().Unix())}
	newID, err := b.ClusterID()
	if err != nil {
		return nil, err
	}
	rep.NewClusterID = fmt.Sprintf("%x", newID)
	src, raw := o.From, false
	if rawPath != "" {
		src, raw = rawPath, true
	}
	dataDir, err := RestoreDataDir(src, raw, b, filepath.Join(work, "restored"))
	if err != nil {
		return nil, err
	}
	tarball, err := Tarball(dataDir)
	if err != nil {
		return nil, err
	}
	t.logf("checks passed: restoring %s (revision %d) on %s as a new etcd cluster %s", rep.Source, rep.Revision, target.Name, rep.NewClusterID)

	// From here on nodes change.
	for _, s := range states {
		if err := t.stopControlPlane(ctx, s); err != nil {
			return rep, err
		}
		t.logf("%s: control plane stopped (static pod manifests in %s)", s.Name, AsideDir)
	}
	if o.FromData != "" {
		// The member is stopped now: the copy taken for the checks may
		// have missed its last writes.
		if snap, err = t.copyRawDB(ctx, target, rawPath, want); err != nil {
			return rep, err
		}
		rep.Revision = snap.Revision
		os.RemoveAll(filepath.Join(work, "restored"))
		if dataDir, err = RestoreDataDir(rawPath, true, b, filepath.Join(work, "restored")); err != nil {
			return rep, err
		}
		if tarball, err = Tarball(dataDir); err != nil {
			return rep, err
		}
	}
	if err := t.startRestored(ctx, target, tarball, newID); err != nil {
		return rep, err
	}
	cli, err := etcdclient.ThroughSSH(ctx, target.c)
	if err != nil {
		return rep, err
	}
	defer cli.Close()
	for _, s := range states {
		if s == target {
			continue
		}
		if !s.member() {
			rep.Rejoin = append(rep.Rejoin, s.Name)
			continue
		}
		if err := t.readd(ctx, cli, s); err != nil {
			return rep, fmt.Errorf("%s: re-adding it as a member: %w", s.Name, err)
		}
		rep.Readded = append(rep.Readded, s.Name)
	}
	if err := waitFor(ctx, 3*time.Minute, "the API at the cluster's endpoint", func() error {
		return queryOK(ctx, target, readyzScript(""))
	}); err != nil {
		return rep, fmt.Errorf("%s: %w", target.Name, err)
	}
	t.logf("the API answers at the cluster's endpoint through %s", target.Name)
	for _, name := range rep.Rejoin {
		// The restored data still holds the Node of the machine that was
		// there, Ready as of the snapshot: kubeadm join refuses to join
		// over a Ready Node, and that machine's kubelet is gone.
		if _, err := mustRun(ctx, target, "deleting the stale Node "+name, scripts.Render("kubectl/delete-node", nodeArgs{Kubectl: "kubectl --kubeconfig " + adminConf, Node: name})); err != nil {
			return rep, err
		}
	}
	if _, rep.Members, err = Members(ctx, cli); err != nil {
		return rep, err
	}
	if err := t.record(rep.NewClusterID, "restore"); err != nil {
		t.logf("warning: the cluster history %s: %v", t.History, err)
	}
	rep.Took = time.Since(start)
	return rep, nil
}

// checkSnapshot opens the snapshot and checks it is this cluster's.
func (t Target) checkSnapshot(path string, want pins) (*Status, *Metadata, error) {
	st, err := Check(path, false)
	if err != nil {
		return nil, nil, err
	}
	meta, err := ReadMetadata(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		t.logf("note: %s has no metadata beside it: checked by its embedded checksum and the cluster CA its data publishes", path)
		meta = nil
	case err != nil:
		return nil, nil, err
	default:
		if meta.SHA256 != st.SHA256 {
			return nil, nil, fmt.Errorf("%s: %w: its SHA-256 is %s, but %s says %s: the file changed since it was taken", path, ErrNotSnapshot, st.SHA256, MetadataPath(path), meta.SHA256)
		}
		if meta.Cluster != "" && meta.Cluster != t.Inventory.Cluster.Name {
			return nil, nil, fmt.Errorf("%s is a snapshot of cluster %s, not of %s (cluster.name)", path, meta.Cluster, t.Inventory.Cluster.Name)
		}
		if meta.EtcdCA != want.etcd || meta.ClusterCA != want.cluster {
			return nil, nil, fmt.Errorf("%s is a snapshot of a cluster with other CAs than the secrets bundle's: another cluster's snapshot (or another cluster's bundle)", path)
		}
	}
	if err := t.dataIsOurs(path, st, want); err != nil {
		return nil, nil, err
	}
	return st, meta, nil
}

// dataIsOurs checks the data holds Kubernetes objects, published by an
// apiserver trusting the bundle's CA.
func (t Target) dataIsOurs(path string, st *Status, want pins) error {
	if !st.Kubernetes {
		return fmt.Errorf("%s: %w: it holds no Kubernetes objects (no /registry/ key)", path, ErrNotSnapshot)
	}
	if st.ClusterCA == nil {
		return nil
	}
	pin, err := pki.CAPin(st.ClusterCA)
	if err != nil || pin != want.cluster {
		return fmt.Errorf("%s holds the data of a cluster whose CA is not the secrets bundle's (kube-system/extension-apiserver-authentication): another cluster's", path)
	}
	return nil
}

// quorumLost refuses a restore while a quorum of etcd's members is
// healthy, unless forced, and records the live cluster IDs.
func (t Target) quorumLost(ctx context.Context, states []*nodeState, declared int, force bool, rep *RestoreReport) error {
	members, healthy := declared, []string{}
	for _, s := range states {
		if s.health == nil {
			continue
		}
		id := fmt.Sprintf("%x", s.health.ClusterID)
		if !contains(rep.OldClusterIDs, id) {
			rep.OldClusterIDs = append(rep.OldClusterIDs, id)
		}
		if s.health.Healthy() {
			healthy = append(healthy, s.Name)
		}
	}
	for _, s := range states {
		if s.health == nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if cli, err := etcdclient.ThroughSSH(cctx, s.c); err == nil {
			if _, ms, err := Members(cctx, cli); err == nil && len(ms) > 0 {
				members = len(ms)
			}
			cli.Close()
		}
		cancel()
		break
	}
	quorum := members/2 + 1
	if len(healthy) >= quorum {
		if !force {
			return fmt.Errorf("etcd has quorum: %d of %d members healthy (%s), so the cluster keeps its data; a restore would throw away every write since the snapshot. "+
				"Nothing was changed. If the data itself is wrong (and not just some nodes down), restore anyway with --force", len(healthy), members, strings.Join(healthy, ", "))
		}
		t.logf("warning: etcd has quorum (%d of %d healthy: %s), restoring anyway (--force)", len(healthy), members, strings.Join(healthy, ", "))
	}
	return nil
}

// pickTarget is the named node, else FromData's, else the reachable set-up
// node whose member applied the most (one whose etcd does not answer
// after those).
func pickTarget(states []*nodeState, o RestoreOptions) (*nodeState, error) {
	name := o.Node
	if name == "" {
		name = o.FromData
	}
	if name != "" {
		for _, s := range states {
			if s.Name == name {
				if !s.member() {
					return nil, fmt.Errorf("%s holds no set-up control plane (its etcd manifest and kubeadm's completion marker): it cannot run the restored cluster; name another node", name)
				}
				return s, nil
			}
		}
		return nil, fmt.Errorf("%s is unreachable: it cannot run the restored cluster; name another node", name)
	}
	var best *nodeState
	for _, s := range states {
		if !s.member() {
			continue
		}
		if best == nil || s.health != nil && (best.health == nil || s.health.AppliedIndex > best.health.AppliedIndex) {
			best = s
		}
	}
	if best == nil {
		return nil, errors.New("no reachable control-plane node holds a set-up control plane (an etcd manifest and kubeadm's completion marker) to run the restored cluster: " +
			"power on one that does, or rebuild the cluster (homelab up) and restore into it")
	}
	return best, nil
}

// copyRawDB copies the member's db file off the node and opens it.
func (t Target) copyRawDB(ctx context.Context, s *nodeState, local string, want pins) (*Status, error) {
	p := filepath.Join(s.flags["data-dir"], "member/snap/db")
	data, err := s.c.Read(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("%s: reading %s: %w", s.Name, p, err)
	}
	if err := os.WriteFile(local, data, 0o600); err != nil {
		return nil, err
	}
	st, err := Check(local, true)
	if err != nil {
		return nil, fmt.Errorf("%s:%s: %w", s.Name, p, err)
	}
	if err := t.dataIsOurs(s.Name+":"+p, st, want); err != nil {
		return nil, err
	}
	return st, nil
}

// podsArgs are etcd/aside's and etcd/back's: which static pods move
// between the manifests' directory and the aside one.
type podsArgs struct {
	ManifestDir, AsideDir string
	Pods                  []string
}

// asideScript moves the control plane's manifests aside (the kubelet
// stops their pods).
func asideScript() scripts.Script {
	return scripts.Render("etcd/aside", podsArgs{ManifestDir: manifestDir, AsideDir: AsideDir, Pods: controlPlanePods})
}

// backScript puts manifests back, removing the aside directory once empty.
func backScript(pods ...string) scripts.Script {
	return scripts.Render("etcd/back", podsArgs{ManifestDir: manifestDir, AsideDir: AsideDir, Pods: pods})
}

type nodeArgs struct{ Kubectl, Node string }

// readyzScript asks admin.conf's server, or server when set, for /readyz.
func readyzScript(server string) scripts.Script {
	return scripts.Render("etcd/readyz", struct{ AdminConf, Server string }{adminConf, server})
}

// listeners lists what still listens on etcd's ports and the apiserver's
// (the inventory's cluster.endpoint.port, which kubeadm makes its bind
// port): the control plane has stopped when it prints nothing.
func (t Target) listeners() scripts.Script {
	return scripts.Render("etcd/listeners", struct{ APIPort int }{t.Inventory.Cluster.Endpoint.APIPort()})
}

func (t Target) stopControlPlane(ctx context.Context, s *nodeState) error {
	if _, err := mustRun(ctx, s, "moving the control plane's manifests aside", asideScript()); err != nil {
		return err
	}
	return waitFor(ctx, 3*time.Minute, "etcd and the apiserver to stop", func() error {
		r, err := s.c.Query(ctx, t.listeners().String())
		if err != nil {
			return err
		}
		if out := strings.TrimSpace(string(r.Stdout)); out != "" || r.ExitCode != 0 {
			return fmt.Errorf("still listening: %s", out)
		}
		return nil
	})
}

// startRestored puts the restored data in place on the target and starts
// its etcd, then the rest of its control plane.
func (t Target) startRestored(ctx context.Context, s *nodeState, tarball []byte, newID uint64) error {
	if err := s.c.Upload(ctx, upload, tarball, 0o600); err != nil {
		return err
	}
	script := scripts.Render("etcd/restore-data", restoreDataArgs{moveAsideArgs: moveAsideOf(s.flags["data-dir"]), Upload: upload})
	out, err := mustRun(ctx, s, "putting the restored data in place", script)
	if err != nil {
		return err
	}
	t.logf("%s: restored data in %s%s", s.Name, s.flags["data-dir"], keptAt(out))
	if err := putBack(ctx, s, "etcd"); err != nil {
		return err
	}
	if err := waitFor(ctx, 3*time.Minute, "the restored etcd member", func() error {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		cli, err := etcdclient.ThroughSSH(cctx, s.c)
		if err != nil {
			return err
		}
		defer cli.Close()
		h, err := MemberHealth(cctx, cli)
		if err != nil {
			return err
		}
		if !h.Healthy() || h.ClusterID != newID {
			return fmt.Errorf("cluster %x, leader %x", h.ClusterID, h.Leader)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("%s: %w", s.Name, err)
	}
	t.logf("%s: etcd runs as the one member of cluster %x", s.Name, newID)
	if err := putBack(ctx, s, controlPlanePods[1:]...); err != nil {
		return err
	}
	return t.waitAPI(ctx, s)
}

func putBack(ctx context.Context, s *nodeState, pods ...string) error {
	_, err := mustRun(ctx, s, "putting back "+strings.Join(pods, ", "), backScript(pods...))
	return err
}

// apiURL is the node's own apiserver: its etcd's advertised address (the
// one kubeadm advertises the apiserver on), else its inventory address,
// at the inventory's API port.
func (t Target) apiURL(s *nodeState) string {
	port := strconv.Itoa(t.Inventory.Cluster.Endpoint.APIPort())
	addr := "https://" + net.JoinHostPort(s.Address, port)
	if u := s.flags["advertise-client-urls"]; u != "" {
		if h, _, err := net.SplitHostPort(strings.TrimPrefix(strings.Split(u, ",")[0], "https://")); err == nil {
			addr = "https://" + net.JoinHostPort(h, port)
		}
	}
	return addr
}

// waitAPI waits for the node's own apiserver to be ready.
func (t Target) waitAPI(ctx context.Context, s *nodeState) error {
	addr := t.apiURL(s)
	return waitFor(ctx, 4*time.Minute, s.Name+"'s apiserver", func() error {
		return queryOK(ctx, s, readyzScript(addr))
	})
}

// keptPrefix starts the line moveAsideScript prints with where the data
// went.
const keptPrefix = "kept-at="

type moveAsideArgs struct{ DataDir, BeforeDir, KeptPrefix string }

func moveAsideOf(dataDir string) moveAsideArgs {
	return moveAsideArgs{DataDir: dataDir, BeforeDir: BeforeRestoreDir, KeptPrefix: keptPrefix}
}

type restoreDataArgs struct {
	moveAsideArgs
	Upload string
}

// moveAsideScript moves the member directory under dataDir, if any, to a
// new directory of its own under BeforeRestoreDir and prints where.
func moveAsideScript(dataDir string) scripts.Script {
	return scripts.Render("etcd/move-aside", moveAsideOf(dataDir))
}

// keptAt says where moveAsideScript's output put the old data.
func keptAt(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if dir, ok := strings.CutPrefix(strings.TrimSpace(l), keptPrefix); ok {
			return " (the old data kept in " + dir + ")"
		}
	}
	return " (there was no old data)"
}

// readd makes a set-up control-plane node a fresh member of the restored
// cluster, as kubeadm's join does: its old data moved aside, the member
// added as a learner, its manifest listing the members with
// --initial-cluster-state=existing, and promoted once it caught up; then
// the rest of its control plane back.
func (t Target) readd(ctx context.Context, cli *clientv3.Client, s *nodeState) error {
	out, err := mustRun(ctx, s, "moving its old etcd data aside", moveAsideScript(s.flags["data-dir"]))
	if err != nil {
		return err
	}
	t.logf("%s: old etcd data%s", s.Name, keptAt(out))
	if err := s.c.Note("etcd member add --learner " + s.peerURL()); err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	resp, err := cli.MemberAddAsLearner(actx, []string{s.peerURL()})
	cancel()
	if err != nil {
		return err
	}
	var cluster []string
	for _, m := range resp.Members {
		name := m.Name
		if m.ID == resp.Member.ID {
			name = s.flags["name"]
		}
		for _, u := range m.PeerURLs {
			cluster = append(cluster, name+"="+u)
		}
	}
	manifest, err := joiningManifest(s.manifest, strings.Join(cluster, ","))
	if err != nil {
		return err
	}
	if err := s.c.Upload(ctx, manifestDir+"/etcd.yaml", manifest, 0o600); err != nil {
		return err
	}
	if _, err := mustRun(ctx, s, "removing its set-aside etcd manifest", scripts.Render("etcd/drop-aside-manifest", struct{ Path string }{AsideDir + "/etcd.yaml"})); err != nil {
		return err
	}
	if err := s.c.Note(fmt.Sprintf("etcd member promote %x", resp.Member.ID)); err != nil {
		return err
	}
	if err := waitFor(ctx, 3*time.Minute, "its member to catch up and be promoted", func() error {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := cli.MemberPromote(pctx, resp.Member.ID)
		return err
	}); err != nil {
		return err
	}
	t.logf("%s: a voting member again (etcd member %x)", s.Name, resp.Member.ID)
	if err := putBack(ctx, s, controlPlanePods[1:]...); err != nil {
		return err
	}
	return t.waitAPI(ctx, s)
}

func mustRun(ctx context.Context, s *nodeState, what string, script scripts.Script) (string, error) {
	r, err := s.c.Run(ctx, script.String())
	if err != nil {
		return "", fmt.Errorf("%s: %s: %w", s.Name, what, err)
	}
	if r.ExitCode != 0 {
		return "", fmt.Errorf("%s: %s failed (exit %d): %s", s.Name, what, r.ExitCode, strings.TrimSpace(string(r.Stdout)+string(r.Stderr)))
	}
	return string(r.Stdout), nil
}

func queryOK(ctx context.Context, s *nodeState, script scripts.Script) error {
	r, err := s.c.Query(ctx, script.String())
	if err != nil {
		return err
	}
	if r.ExitCode != 0 {
		return fmt.Errorf("exit %d: %s", r.ExitCode, strings.TrimSpace(string(r.Stderr)))
	}
	return nil
}

func waitFor(ctx context.Context, bound time.Duration, what string, fn func() error) error {
	deadline := time.Now().Add(bound)
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s for %s: %w", bound, what, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Rejoin makes a set-up control-plane node that was unreachable during a
// restore (its etcd member still of the lost cluster) a fresh member of
// the running cluster: its control plane set aside, its data moved aside,
// then as Restore re-adds members. Refused while the node's member is
// part of the running cluster, or without a healthy member to add it
// through.
func Rejoin(ctx context.Context, t Target, name string) error {
	if n, ok := t.Inventory.Node(name); !ok || !n.IsControlPlane() {
		return fmt.Errorf("%s is not a control-plane node of the inventory", name)
	}
	want, err := t.pins()
	if err != nil {
		return err
	}
	nodes := t.connect(ctx)
	defer closeAll(nodes)
	var s *nodeState
	var cli *clientv3.Client
	for _, n := range nodes {
		if n.c == nil {
			if n.Name == name {
				return fmt.Errorf("%s is unreachable: %v", name, n.err)
			}
			continue
		}
		if _, err := sameCAs(ctx, n, want); err != nil {
			return err
		}
		st, err := t.probe(ctx, n)
		if err != nil {
			return err
		}
		if n.Name == name {
			s = st
			continue
		}
		if cli == nil && st.health != nil && st.health.Healthy() {
			if cli, err = etcdclient.ThroughSSH(ctx, n.c); err != nil {
				return err
			}
			defer cli.Close()
		}
	}
	if !s.member() {
		return fmt.Errorf("%s holds no set-up control plane: homelab up joins it", name)
	}
	if cli == nil {
		return fmt.Errorf("no other control-plane node's etcd member is healthy: nothing to rejoin %s to (homelab etcd restore first)", name)
	}
	_, members, err := Members(ctx, cli)
	if err != nil {
		return err
	}
	for _, m := range members {
		if m.Name == s.flags["name"] || m.PeerURL == s.peerURL() {
			return fmt.Errorf("%s is a member of the running etcd cluster already (%s): nothing to rejoin", name, m.ID)
		}
	}
	if err := t.stopControlPlane(ctx, s); err != nil {
		return err
	}
	return t.readd(ctx, cli, s)
}

// seedTarget is the node a restore seeds when every reachable
// control-plane node is blank (their disks replaced: the nodes' own
// copies went with them) and the bootstrap node is among them: nil
// otherwise, and always for --from-data (a blank node has no data). Only
// the bootstrap node: up's KubeadmInit looks for the cluster there first,
// and repairs a marked node over its data rather than initialise anew.
func (t Target) seedTarget(states []*nodeState, o RestoreOptions) *nodeState {
	if o.FromData != "" || len(states) == 0 {
		return nil
	}
	boot := t.Inventory.Bootstrap()
	var seed *nodeState
	for _, s := range states {
		if !s.blank() {
			return nil
		}
		if s.Name == boot.Name {
			seed = s
		}
	}
	if o.Node != "" && seed != nil && o.Node != seed.Name {
		return nil // pickTarget refuses it: a blank node cannot run the data
	}
	return seed
}

// seed puts the snapshot's data, restored as a one-member cluster of the
// bootstrap node (its name and peer URL as kubeadm gives them), in its
// etcd data directory and marks it set up. Nothing starts here: the up
// that follows writes the node's files, finds the bootstrap node marked
// with etcd data and no control plane, and repairs it over that data with
// kubeadm's init phases (certificates from the bundle's CAs, kubeconfigs,
// manifests, the kubelet), never a new init; then it joins the other
// control-plane nodes, whose stale Node objects it deletes as for any
// replaced machine.
func (t Target) seed(ctx context.Context, s *nodeState, snap *Status, o RestoreOptions, rep *RestoreReport, start time.Time) (*RestoreReport, error) {
	work, err := os.MkdirTemp("", "homelab-seed-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	b := Bootstrap{Name: s.Name, PeerURL: "https://" + net.JoinHostPort(s.Address, "2380"), Token: fmt.Sprintf("homelab-restore-%d", time.Now().Unix())}
	newID, err := b.ClusterID()
	if err != nil {
		return nil, err
	}
	rep.Node, rep.Revision, rep.NewClusterID, rep.Seeded = s.Name, snap.Revision, fmt.Sprintf("%x", newID), true
	dataDir, err := RestoreDataDir(o.From, false, b, filepath.Join(work, "restored"))
	if err != nil {
		return nil, err
	}
	tarball, err := Tarball(dataDir)
	if err != nil {
		return nil, err
	}
	t.logf("every reachable control-plane node is blank: seeding %s with %s (revision %d) as a new etcd cluster %s, for up to repair over it", s.Name, rep.Source, rep.Revision, rep.NewClusterID)
	if err := s.c.Upload(ctx, upload, tarball, 0o600); err != nil {
		return rep, err
	}
	if _, err := mustRun(ctx, s, "putting the restored data in place", scripts.Render("etcd/seed", seedArgs{
		restoreDataArgs: restoreDataArgs{moveAsideArgs: moveAsideOf(nodefacts.EtcdDataDir), Upload: upload}, Marker: nodefacts.InitMarker})); err != nil {
		return rep, err
	}
	t.logf("%s: restored data in %s, marked set up (%s)", s.Name, nodefacts.EtcdDataDir, nodefacts.InitMarker)
	for _, n := range t.Inventory.ControlPlanes() {
		if n.Name != s.Name {
			rep.Rejoin = append(rep.Rejoin, n.Name)
		}
	}
	if err := t.record(rep.NewClusterID, "restore"); err != nil {
		t.logf("warning: the cluster history %s: %v", t.History, err)
	}
	rep.Took = time.Since(start)
	return rep, nil
}

// seedArgs are etcd/seed's.
type seedArgs struct {
	restoreDataArgs
	Marker string
}
