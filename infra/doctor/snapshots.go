package doctor

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/homelab-dev/homelab/infra/etcdbackup"
	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/etcdsnapshot"
)

// snapshotFacts is a control-plane node's scheduled snapshots as found.
type snapshotFacts struct {
	read        bool
	timerActive bool
	count       int
	newest      string
	age         time.Duration
}

// snapshotsArgs are doctor/snapshots': the timer, and where and how the
// timer names the snapshots it keeps.
type snapshotsArgs struct {
	Timer string
	etcdbackup.ListingArgs
}

// snapshotScript reads, read-only, the timer's state, the node's clock and
// its snapshots.
func snapshotScript() scripts.Script {
	return scripts.Render("doctor/snapshots", snapshotsArgs{Timer: etcdsnapshot.Timer, ListingArgs: etcdbackup.Listing})
}

func readSnapshots(ctx context.Context, c *ssh.Client) *snapshotFacts {
	res, err := c.Query(ctx, snapshotScript().String())
	if err != nil || res.ExitCode != 0 {
		return &snapshotFacts{}
	}
	return parseSnapshots(string(res.Stdout))
}

// parseSnapshots reads doctor/snapshots' answer; the newest snapshot's
// age is by the node's own clock, so a skewed laptop clock cannot age it.
func parseSnapshots(stdout string) *snapshotFacts {
	s := &snapshotFacts{read: true}
	var now int64
	var listing strings.Builder
	for _, line := range strings.Split(stdout, "\n") {
		switch k, v, _ := strings.Cut(line, "="); k {
		case "timer":
			s.timerActive = v == "active"
		case "now":
			now, _ = strconv.ParseInt(v, 10, 64)
		default:
			listing.WriteString(line + "\n")
		}
	}
	listed, err := etcdsnapshot.ParseListing(listing.String())
	if err != nil {
		// Not the timer's: doctor judges what the timer keeps.
		return &snapshotFacts{}
	}
	s.count = len(listed)
	if len(listed) > 0 {
		s.newest = listed[0].Name
		s.age = time.Duration(now-listed[0].MTime.Unix()) * time.Second
	}
	return s
}

// judgeSnapshots is the "etcd snapshot" row of a control-plane node: OK
// while its newest scheduled snapshot is younger than two intervals, WARN
// past that, or when the timer does not run or none was saved.
func judgeSnapshots(sn *inventory.Snapshots, interval time.Duration, s *snapshotFacts) (Status, string) {
	switch {
	case !s.read:
		return Warn, "could not read " + etcdsnapshot.Dir
	case !s.timerActive:
		return Warn, "the snapshot timer " + etcdsnapshot.Timer + " is not running (up starts it)"
	case s.count == 0:
		return Warn, "no snapshot saved yet in " + etcdsnapshot.Dir + " (every " + sn.Schedule + "; see journalctl -u " + etcdsnapshot.Service + ")"
	case s.age > 2*interval:
		return Warn, "the newest snapshot " + s.newest + " is " + s.age.String() + " old, more than two intervals (every " + sn.Schedule + "): the timer's runs fail? see journalctl -u " + etcdsnapshot.Service
	}
	return OK, "the newest snapshot " + s.newest + " is " + s.age.String() + " old (every " + sn.Schedule + ", " + strconv.Itoa(s.count) + " kept of " + strconv.Itoa(sn.Keep) + ")"
}

func (d *doctor) checkSnapshots(n inventory.Node, f *nodeFacts) {
	sn := d.t.Inventory.Cluster.Etcd.Snapshots
	if sn == nil || !n.IsControlPlane() || f.snapshots == nil {
		return
	}
	interval, _, err := inventory.SnapshotSchedule(sn.Schedule)
	if err != nil {
		return
	}
	st, detail := judgeSnapshots(sn, interval, f.snapshots)
	d.r.add("etcd snapshot", n.Name, st, "%s", detail)
}
