package inventory

import (
	"fmt"
	"strings"
	"time"
)

// Etcd is what the cluster's etcd gets beyond kubeadm's defaults.
type Etcd struct {
	// Snapshots, when set, makes every control-plane node save a snapshot
	// of its etcd member on a schedule, keeping the newest Keep.
	Snapshots *Snapshots `json:"snapshots,omitempty" yaml:"snapshots"`
}

// Snapshots schedules etcd snapshots on the control-plane nodes (a systemd
// timer each; homelab etcd snapshot --fetch copies the newest off them).
type Snapshots struct {
	// Schedule is an interval (30m, 6h, 1h30m) counted from the last
	// snapshot, or hourly, daily or weekly (calendar times, caught up
	// after a node was off).
	Schedule string `json:"schedule" yaml:"schedule"`
	// Keep is how many snapshots each node keeps; older ones are deleted.
	// The same count is kept off-site, per node.
	Keep int `json:"keep" yaml:"keep"`
	// S3, when set, also uploads every snapshot to an S3-compatible
	// bucket, off the nodes whose disks it exists to outlive.
	S3 *SnapshotsS3 `json:"s3,omitempty" yaml:"s3"`
}

// Defaults of a snapshots section, those of RKE2 and k3s: every 12 hours,
// 5 kept.
const (
	DefaultSnapshotSchedule = "12h"
	DefaultSnapshotKeep     = 5
)

// Limits of a snapshot schedule: shorter intervals are refused (the timer
// would snapshot back to back), and each snapshot holds the whole
// database, so more than maxSnapshotKeep fill a disk unnoticed.
const (
	minSnapshotInterval  = 10 * time.Second
	warnSnapshotInterval = 5 * time.Minute
	maxSnapshotKeep      = 1000
)

// calendarSchedules are the named calendar times a schedule may be, with
// the longest time between two of them.
var calendarSchedules = map[string]time.Duration{
	"hourly": time.Hour,
	"daily":  24 * time.Hour,
	"weekly": 7 * 24 * time.Hour,
}

// SnapshotSchedule reads a schedule: an interval, or one of the named
// calendar times (calendar set, interval the time between two of them).
func SnapshotSchedule(s string) (interval time.Duration, calendar string, err error) {
	if d, ok := calendarSchedules[s]; ok {
		return d, s, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || strings.HasPrefix(s, "-") {
		return 0, "", fmt.Errorf("%q is neither an interval (such as 30m, 6h or 1h30m) nor one of hourly, daily, weekly", s)
	}
	return d, "", nil
}

func checkSnapshots(ps *problems, inv *Inventory) {
	sn := inv.Cluster.Etcd.Snapshots
	if sn == nil {
		return
	}
	const path = "cluster.etcd.snapshots"
	d, _, err := SnapshotSchedule(sn.Schedule)
	switch {
	case err != nil:
		ps.errorf(path+".schedule", "%v; e.g. %s", err, DefaultSnapshotSchedule)
	case d < minSnapshotInterval:
		ps.errorf(path+".schedule", "%s is shorter than %s: snapshots would run back to back; use e.g. %s", sn.Schedule, minSnapshotInterval, DefaultSnapshotSchedule)
	case d < warnSnapshotInterval:
		ps.warnf(path+".schedule", "a snapshot every %s: each holds the whole etcd database, and %d are kept per node; fine for a test, heavy for a homelab", d, sn.Keep)
	}
	if sn.Keep < 1 || sn.Keep > maxSnapshotKeep {
		ps.errorf(path+".keep", "%d snapshots per node: keep between 1 and %d (each holds the whole database), e.g. %d", sn.Keep, maxSnapshotKeep, DefaultSnapshotKeep)
	}
	if sn.S3 != nil {
		checkSnapshotsS3(ps, sn.S3)
	}
}
