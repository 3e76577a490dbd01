package etcdbackup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/homelab-dev/homelab/infra/etcdclient"
	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/roles/etcdsnapshot"
)

// Take saves a snapshot of the cluster into path through the first
// control-plane node (or from) whose etcd member is healthy: its CAs
// checked against the bundle first, then Save.
func Take(ctx context.Context, t Target, path, from string) (*Metadata, error) {
	if from != "" {
		if n, ok := t.Inventory.Node(from); !ok || !n.IsControlPlane() {
			return nil, fmt.Errorf("--from %s: not a control-plane node of the inventory", from)
		}
	}
	want, err := t.pins()
	if err != nil {
		return nil, err
	}
	nodes := t.connect(ctx)
	defer closeAll(nodes)
	var problems []string
	for _, n := range nodes {
		if from != "" && n.Name != from {
			continue
		}
		if n.c == nil {
			problems = append(problems, fmt.Sprintf("%s unreachable (%v)", n.Name, n.err))
			continue
		}
		if _, err := sameCAs(ctx, n, want); err != nil {
			return nil, err
		}
		meta, err := func() (*Metadata, error) {
			cli, err := etcdclient.ThroughSSH(ctx, n.c)
			if err != nil {
				return nil, err
			}
			defer cli.Close()
			return Save(ctx, cli, path, Metadata{Cluster: t.Inventory.Cluster.Name, Node: n.Name, EtcdCA: want.etcd, ClusterCA: want.cluster})
		}()
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", n.Name, err))
			continue
		}
		if err := t.record(meta.ClusterID, "snapshot"); err != nil {
			t.logf("warning: the cluster history %s: %v", t.History, err)
		}
		return meta, nil
	}
	return nil, fmt.Errorf("no snapshot taken: %s", strings.Join(problems, "; "))
}

// onNode is a snapshot a node's timer saved.
type onNode struct {
	node *node
	name string // snapshot-...db
	at   time.Time
}

// NodeSnapshots lists a node's scheduled snapshots, newest first, with
// their modification times: read-only.
func listOnNode(ctx context.Context, n *node) ([]onNode, error) {
	r, err := n.c.Query(ctx, ListingScript().String())
	if err != nil {
		return nil, err
	}
	return parseListing(n, string(r.Stdout))
}

// ListingArgs are the etcd/snapshots script's: where the timer saves
// snapshots and the names it gives them. A script that includes the
// listing (homelab doctor's) embeds them.
type ListingArgs struct{ Dir, Pattern string }

// Listing is where the snapshot timer keeps its snapshots, as
// etcd/snapshots is given it.
var Listing = ListingArgs{Dir: etcdsnapshot.Dir, Pattern: etcdsnapshot.NamePattern}

// ListingScript lists a node's scheduled snapshots for
// etcdsnapshot.ParseListing.
func ListingScript() scripts.Script { return scripts.Render("etcd/snapshots", Listing) }

// errForeignListing is a listing no timer of ours wrote: Fetch stops
// rather than trusting that node for anything else.
var errForeignListing = etcdsnapshot.ErrForeignLine

// parseListing reads listOnNode's lines; anything else is refused, never
// skipped (etcdsnapshot.ParseListing).
func parseListing(n *node, stdout string) ([]onNode, error) {
	listed, err := etcdsnapshot.ParseListing(stdout)
	if err != nil {
		return nil, fmt.Errorf("%s lists what the snapshot timer never writes in %s: %w; nothing was fetched: look at what wrote that directory on %s",
			n.Name, etcdsnapshot.Dir, err, n.Name)
	}
	out := make([]onNode, len(listed))
	for i, l := range listed {
		out[i] = onNode{node: n, name: l.Name, at: l.MTime}
	}
	return out, nil
}

// etcdctlStatus is what the node's script saved beside a snapshot.
type etcdctlStatus struct {
	Status []struct {
		Status struct {
			Header struct {
				ClusterID json.Number `json:"cluster_id"`
				MemberID  json.Number `json:"member_id"`
			} `json:"header"`
		} `json:"Status"`
	} `json:"status"`
	Members *struct {
		Members []struct {
			ID        json.Number `json:"ID"`
			Name      string      `json:"name"`
			PeerURLs  []string    `json:"peerURLs"`
			IsLearner bool        `json:"isLearner"`
		} `json:"members"`
	} `json:"members"`
}

func hexOf(n json.Number) string {
	v, err := strconv.ParseUint(n.String(), 10, 64)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%x", v)
}

// Fetch copies the newest snapshot the control-plane nodes' timers saved
// to out (a file, or a directory to put it in under its node's name),
// checks it and writes its metadata beside it.
func Fetch(ctx context.Context, t Target, out string) (*Metadata, string, error) {
	want, err := t.pins()
	if err != nil {
		return nil, "", err
	}
	nodes := t.connect(ctx)
	defer closeAll(nodes)
	var newest *onNode
	var problems []string
	for _, n := range nodes {
		if n.c == nil {
			problems = append(problems, fmt.Sprintf("%s unreachable (%v)", n.Name, n.err))
			continue
		}
		list, err := listOnNode(ctx, n)
		if errors.Is(err, errForeignListing) {
			return nil, "", err
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", n.Name, err))
			continue
		}
		if len(list) > 0 && (newest == nil || list[0].name > newest.name) {
			newest = &list[0]
		}
	}
	if newest == nil {
		return nil, "", fmt.Errorf("no control-plane node holds a scheduled snapshot in %s (cluster.etcd.snapshots set? the timer ran?)%s", etcdsnapshot.Dir, joinProblems(problems))
	}
	n := newest.node
	if _, err := sameCAs(ctx, n, want); err != nil {
		return nil, "", err
	}
	src := etcdsnapshot.Dir + "/" + newest.name
	data, err := n.c.Read(ctx, src)
	if err != nil {
		return nil, "", err
	}
	if fi, err := os.Stat(out); out == "" || err == nil && fi.IsDir() {
		out = filepath.Join(out, t.Inventory.Cluster.Name+"-"+n.Name+"-"+newest.name)
	}
	if err := writeAtomic(out, data, 0o600); err != nil {
		return nil, "", err
	}
	sum, _ := n.c.Read(ctx, src+".sha256")
	state, _ := n.c.Read(ctx, strings.TrimSuffix(src, ".db")+etcdsnapshot.EtcdStatusSuffix)
	meta, err := keepScheduled(t, want, out, n.Name, newest.at, sum, state)
	if err != nil {
		return nil, "", fmt.Errorf("%s:%s: %w", n.Name, src, err)
	}
	return meta, out, nil
}

// CheckScheduled checks a scheduled snapshot copied to out from the
// off-site bucket (node's, taken at takenAt) as Fetch does one copied off
// its node: opened and checked, matched against the .sha256 line its node
// wrote (sum), its metadata written beside it with what the etcdctl
// status saved with it says (etcdState; either may be nil). A snapshot
// that fails is removed.
func CheckScheduled(t Target, out, node string, takenAt time.Time, sum, etcdState []byte) (*Metadata, error) {
	want, err := t.pins()
	if err != nil {
		return nil, err
	}
	return keepScheduled(t, want, out, node, takenAt, sum, etcdState)
}

func keepScheduled(t Target, want pins, out, node string, takenAt time.Time, sum, etcdState []byte) (*Metadata, error) {
	st, err := Check(out, false)
	if err != nil {
		os.Remove(out)
		return nil, err
	}
	if sum != nil && !strings.HasPrefix(string(sum), st.SHA256) {
		os.Remove(out)
		return nil, fmt.Errorf("does not match the .sha256 its node wrote: damaged since it was taken")
	}
	meta := &Metadata{Cluster: t.Inventory.Cluster.Name, Node: node, Revision: st.Revision, TotalKeys: st.TotalKey,
		TakenAt: takenAt.UTC(), Size: st.Size, SHA256: st.SHA256, StorageVersion: st.Version, EtcdCA: want.etcd, ClusterCA: want.cluster}
	var s etcdctlStatus
	if etcdState != nil && json.Unmarshal(etcdState, &s) == nil {
		if len(s.Status) > 0 {
			meta.ClusterID, meta.MemberID = hexOf(s.Status[0].Status.Header.ClusterID), hexOf(s.Status[0].Status.Header.MemberID)
		}
		if s.Members != nil {
			for _, m := range s.Members.Members {
				peer := ""
				if len(m.PeerURLs) > 0 {
					peer = m.PeerURLs[0]
				}
				meta.Members = append(meta.Members, Member{ID: hexOf(m.ID), Name: m.Name, PeerURL: peer, Learner: m.IsLearner})
			}
		}
	}
	if err := writeSidecars(out, meta); err != nil {
		return nil, err
	}
	return meta, nil
}

func joinProblems(ps []string) string {
	if len(ps) == 0 {
		return ""
	}
	return ": " + strings.Join(ps, "; ")
}
