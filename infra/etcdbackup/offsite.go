package etcdbackup

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/homelab-dev/homelab/infra/offsite"
	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/roles/etcdsnapshot"
)

// snapshotNowScript runs a node's scheduled snapshot at once.
func snapshotNowScript() scripts.Script {
	return scripts.Render("etcd/snapshot-now", struct{ Script, Service string }{etcdsnapshot.ScriptPath, etcdsnapshot.Service})
}

// copiedRE is the line the snapshot script ends an off-site copy with.
var copiedRE = regexp.MustCompile(`(?m)^copied to (s3://\S+)$`)

// OffsiteSnapshot is a copy `etcd snapshot --to s3` made: where it is in
// the bucket, the node that made it, and where it was downloaded back to
// and checked.
type OffsiteSnapshot struct {
	URL, Node, Path string
	Meta            *Metadata
}

// SnapshotOffsite runs the scheduled snapshot now on the first reachable
// control-plane node (or from) whose run succeeds, then downloads the copy
// it made back into dir and checks it (FetchOffsite). Its cluster ID, the
// live cluster's, joins the history as Take's does.
func SnapshotOffsite(ctx context.Context, t Target, from, dir string) (*OffsiteSnapshot, error) {
	url, node, err := runScheduled(ctx, t, from)
	if err != nil {
		return nil, err
	}
	path, _, meta, err := FetchOffsite(ctx, t, url, dir)
	if err != nil {
		return nil, fmt.Errorf("%s copied %s, which does not check out: %w", node, url, err)
	}
	if err := t.record(meta.ClusterID, "snapshot"); err != nil {
		t.logf("warning: the cluster history %s: %v", t.History, err)
	}
	return &OffsiteSnapshot{URL: url, Node: node, Path: path, Meta: meta}, nil
}

// runScheduled runs the scheduled snapshot on the first reachable
// control-plane node (or from) whose run succeeds: the node's own script,
// so the copy is made, named and pruned as every scheduled one is. It
// returns the copy's s3:// URL and the node. A node whose run fails (its
// member unhealthy, the bucket refusing it) is reported and the next
// tried; each node is tried once.
func runScheduled(ctx context.Context, t Target, from string) (url, node string, err error) {
	if t.Inventory.Cluster.Etcd.SnapshotsS3() == nil {
		return "", "", fmt.Errorf("--to s3: the inventory has no off-site bucket (cluster.etcd.snapshots.s3)")
	}
	if from != "" {
		if n, ok := t.Inventory.Node(from); !ok || !n.IsControlPlane() {
			return "", "", fmt.Errorf("--from %s: not a control-plane node of the inventory", from)
		}
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
		t.logf("%s: running %s", n.Name, etcdsnapshot.Service)
		res, err := n.c.Run(ctx, snapshotNowScript().String())
		out := strings.TrimSpace(string(res.Stdout) + "\n" + string(res.Stderr))
		if err != nil || res.ExitCode != 0 {
			problems = append(problems, fmt.Sprintf("%s: %s failed (exit %d, %v): %s", n.Name, etcdsnapshot.Service, res.ExitCode, err, lastLines(out, 3)))
			continue
		}
		m := copiedRE.FindStringSubmatch(out)
		if m == nil {
			problems = append(problems, fmt.Sprintf("%s: %s copied nothing off-site (is its script older than the inventory's s3 section? run homelab up): %s", n.Name, etcdsnapshot.Service, lastLines(out, 3)))
			continue
		}
		return m[1], n.Name, nil
	}
	return "", "", fmt.Errorf("no snapshot copied off-site: %s", strings.Join(problems, "; "))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// FetchOffsite downloads the off-site copy raw names (s3://BUCKET/KEY),
// or the newest of every node's when raw is "", into dir, and checks it
// as Fetch does a snapshot copied off its node (CheckScheduled): what
// restore then reads as any snapshot file. The bucket is reached from
// this machine with the inventory's keys, over t.Dial.
func FetchOffsite(ctx context.Context, t Target, raw, dir string) (path string, c offsite.Copy, meta *Metadata, err error) {
	s3 := t.Inventory.Cluster.Etcd.SnapshotsS3()
	if s3 == nil {
		return "", c, nil, fmt.Errorf("the inventory has no off-site bucket (cluster.etcd.snapshots.s3): name it there, or restore a snapshot file with --from FILE")
	}
	keys, err := s3.ReadS3Credentials()
	if err != nil {
		return "", c, nil, err
	}
	ca, err := s3.ReadS3CA()
	if err != nil {
		return "", c, nil, err
	}
	b, err := offsite.Open(s3, keys, ca, t.Dial)
	if err != nil {
		return "", c, nil, err
	}
	if raw == "" {
		all, err := b.List(ctx)
		if err != nil {
			return "", c, nil, err
		}
		if len(all) == 0 {
			return "", c, nil, fmt.Errorf("no snapshot in s3://%s/%s: no node has copied one there yet (homelab doctor shows each node's newest)", s3.Bucket, s3.Prefix)
		}
		c = all[0]
	} else if c, err = b.ParseURL(raw); err != nil {
		return "", c, nil, err
	}
	t.logf("%s: downloading (taken %s on %s)", c.URL(s3.Bucket), c.TakenAt.Format("2006-01-02 15:04:05Z"), c.Node)
	d, err := b.Download(ctx, c, dir)
	if err != nil {
		return "", c, nil, err
	}
	if meta, err = CheckScheduled(t, d.Path, c.Node, c.TakenAt, d.Sum, d.EtcdState); err != nil {
		return "", c, nil, fmt.Errorf("%s: %w", c.URL(s3.Bucket), err)
	}
	return d.Path, c, meta, nil
}
