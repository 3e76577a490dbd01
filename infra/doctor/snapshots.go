package doctor

import (
	"context"
	"strconv"
	"strings"
	"time"

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

// snapshotScript is read-only: the timer's state, how many snapshots the
// node keeps, and the newest's age by the node's own clock.
var snapshotScript = `echo "timer=$(systemctl is-active ` + etcdsnapshot.Timer + ` 2>/dev/null)"
now=$(date +%s)
cd ` + etcdsnapshot.Dir + ` 2>/dev/null || exit 0
n=0; newest=
for f in $(ls -1 | grep -E '` + etcdsnapshot.NamePattern + `' | sort); do n=$((n+1)); newest=$f; done
echo "count=$n"
[ -n "$newest" ] && echo "newest=$newest $((now - $(stat -c %Y "$newest")))"
true`

func readSnapshots(ctx context.Context, c *ssh.Client) *snapshotFacts {
	res, err := c.Query(ctx, snapshotScript)
	if err != nil || res.ExitCode != 0 {
		return &snapshotFacts{}
	}
	s := &snapshotFacts{read: true}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "timer":
			s.timerActive = v == "active"
		case "count":
			s.count, _ = strconv.Atoi(v)
		case "newest":
			name, secs, _ := strings.Cut(v, " ")
			n, _ := strconv.Atoi(secs)
			s.newest, s.age = name, time.Duration(n)*time.Second
		}
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
