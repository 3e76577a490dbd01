package doctor

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/etcdsnapshot"
)

// offsiteFacts is a control-plane node's off-site snapshots as its own
// rclone lists them.
type offsiteFacts struct {
	read    bool
	missing string // rclone, or its configuration
	err     string // rclone's last line when the bucket did not answer
	count   int
	newest  string
	age     time.Duration
}

// offsiteArgs are doctor/offsite's.
type offsiteArgs struct {
	Config, CA, Remote, Pattern string
}

func offsiteScript(s3 *inventory.SnapshotsS3, node string) scripts.Script {
	a := offsiteArgs{Config: etcdsnapshot.RcloneConfigPath, Remote: etcdsnapshot.RemotePath(s3, node), Pattern: etcdsnapshot.NamePattern}
	if s3.CAFile != "" {
		a.CA = etcdsnapshot.CAPath
	}
	return scripts.Render("doctor/offsite", a)
}

func readOffsite(ctx context.Context, c *ssh.Client, s3 *inventory.SnapshotsS3, node string) *offsiteFacts {
	res, err := c.Query(ctx, offsiteScript(s3, node).String())
	if err != nil || res.ExitCode != 0 {
		return &offsiteFacts{}
	}
	return parseOffsite(string(res.Stdout))
}

// parseOffsite reads doctor/offsite's answer. A snapshot's age is from
// the time in its name (when its node took it, UTC) to the node's clock:
// the bucket's own times are the upload's, by the server's clock.
func parseOffsite(stdout string) *offsiteFacts {
	o := &offsiteFacts{read: true}
	var now int64
	for _, line := range strings.Split(stdout, "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "now":
			now, _ = strconv.ParseInt(v, 10, 64)
		case "missing":
			o.missing = v
		case "error":
			o.err = v
		case "snapshot":
			taken, err := time.Parse(etcdsnapshot.TimeFormat, strings.TrimSuffix(strings.TrimPrefix(v, etcdsnapshot.Prefix), ".db"))
			if err != nil {
				continue
			}
			o.count++
			if v > o.newest {
				o.newest = v
				o.age = time.Unix(now, 0).Sub(taken).Round(time.Second)
			}
		}
	}
	return o
}

// judgeOffsite is the "etcd off-site" row of a control-plane node: OK
// while its newest copy in the bucket is younger than two intervals,
// WARN past that, when there is none, or when the node cannot list the
// bucket (the uploads cannot reach it either).
func judgeOffsite(sn *inventory.Snapshots, interval time.Duration, url string, o *offsiteFacts) (Status, string) {
	journal := "; see journalctl -u " + etcdsnapshot.Service
	switch {
	case !o.read:
		return Warn, "could not list " + url
	case o.missing != "":
		return Warn, "the node lacks " + o.missing + ", which the off-site copies need (up installs it)"
	case o.err != "":
		return Warn, "the node cannot list " + url + ": " + o.err + journal
	case o.count == 0:
		return Warn, "no snapshot copied to " + url + " yet (every " + sn.Schedule + ")" + journal
	case o.age > 2*interval:
		return Warn, "the newest copy in " + url + ", " + o.newest + ", is " + o.age.String() + " old, more than two intervals (every " + sn.Schedule + "): the uploads fail?" + journal
	}
	return OK, "the newest copy in " + url + ", " + o.newest + ", is " + o.age.String() + " old (" + strconv.Itoa(o.count) + " kept of " + strconv.Itoa(sn.Keep) + ")"
}

func (d *doctor) checkOffsite(n inventory.Node, f *nodeFacts) {
	sn := d.t.Inventory.Cluster.Etcd.Snapshots
	if sn == nil || sn.S3 == nil || !n.IsControlPlane() || f.offsite == nil {
		return
	}
	interval, _, err := inventory.SnapshotSchedule(sn.Schedule)
	if err != nil {
		return
	}
	st, detail := judgeOffsite(sn, interval, etcdsnapshot.URL(sn.S3, n.Name), f.offsite)
	d.r.add("etcd off-site", n.Name, st, "%s", detail)
}
