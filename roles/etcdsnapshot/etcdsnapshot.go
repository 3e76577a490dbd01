// Package etcdsnapshot renders a control-plane node's scheduled etcd
// snapshots (cluster.etcd.snapshots): a script that saves a snapshot of
// the node's own member with etcdctl and keeps the newest N, the oneshot
// service that runs it and the timer that schedules it. `homelab doctor`
// reads the snapshots' ages and `homelab etcd snapshot --fetch` copies the
// newest off the nodes, both from Dir.
package etcdsnapshot

import (
	"bytes"
	_ "embed"
	"fmt"
	"text/template"
	"time"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/file"
)

// Where the snapshots and units live on a node.
const (
	// Dir holds snapshot-YYYYMMDDTHHMMSSZ.db, each with .db.sha256 and
	// .etcd.json (etcdctl's endpoint status and member list when it was
	// taken). The .db appears last: its presence means the rest is there.
	Dir         = "/var/lib/homelab/etcd-snapshots"
	Prefix      = "snapshot-"
	ScriptPath  = "/usr/local/sbin/homelab-etcd-snapshot"
	ServicePath = "/etc/systemd/system/homelab-etcd-snapshot.service"
	TimerPath   = "/etc/systemd/system/homelab-etcd-snapshot.timer"
	// Timer is the unit up enables and starts; it starts Service, whose
	// runs journald keeps (journalctl -u Service).
	Timer   = "homelab-etcd-snapshot.timer"
	Service = "homelab-etcd-snapshot.service"
	// EtcdStatusSuffix is the file beside a snapshot with etcdctl's view.
	EtcdStatusSuffix = ".etcd.json"
)

// NamePattern matches a snapshot's file name (for grep -E and find).
const NamePattern = `^snapshot-[0-9]{8}T[0-9]{6}Z\.db$`

// TimeFormat is the UTC time in a snapshot's name (date -u +%Y%m%dT%H%M%SZ).
const TimeFormat = "20060102T150405Z"

//go:embed snapshot.sh.tmpl
var scriptTemplate string

var script = template.Must(template.New("script").Parse(scriptTemplate))

var service = `[Unit]
Description=Save a snapshot of this node's etcd member (homelab)
# Not while the node runs no etcd (not joined yet, or a restore moved the
# control plane aside).
ConditionPathExists=/etc/kubernetes/manifests/etcd.yaml

[Service]
Type=oneshot
ExecStart=` + ScriptPath + `
`

var timer = template.Must(template.New("timer").Parse(`[Unit]
Description=Scheduled etcd snapshots (homelab: every {{.Every}}, {{.Keep}} kept)

[Timer]
{{- if .Calendar}}
OnCalendar={{.Calendar}}
Persistent=true
{{- else}}
OnBootSec={{.Seconds}}s
OnUnitActiveSec={{.Seconds}}s
{{- end}}
AccuracySec={{.Accuracy}}s

[Install]
WantedBy=timers.target
`))

// Files renders the script, service and timer for control-plane node;
// none when the inventory schedules no snapshots. The inventory must have
// passed validation.
func Files(sn *inventory.Snapshots, node string) ([]file.File, error) {
	if sn == nil {
		return nil, nil
	}
	interval, calendar, err := inventory.SnapshotSchedule(sn.Schedule)
	if err != nil {
		return nil, err
	}
	// systemd's default accuracy (1 min) would make short intervals drift
	// by a minute; a tenth of the interval, at most a minute, keeps the
	// schedule while letting systemd batch wake-ups.
	accuracy := max(1, min(int(interval.Seconds()/10), 60))
	data := map[string]any{
		"Dir": Dir, "Keep": sn.Keep, "Prefix": Prefix, "Pattern": NamePattern, "StatusSuffix": EtcdStatusSuffix,
		"Calendar": calendar, "Seconds": int(interval.Seconds()), "Accuracy": accuracy, "Every": every(interval, calendar),
	}
	if sn.S3 != nil {
		s3 := map[string]any{"Path": RemotePath(sn.S3, node), "URL": URL(sn.S3, node), "Config": RcloneConfigPath}
		if sn.S3.CAFile != "" {
			s3["CA"] = CAPath
		}
		data["S3"] = s3
	}
	var s, t bytes.Buffer
	if err := script.Execute(&s, data); err != nil {
		return nil, err
	}
	if err := timer.Execute(&t, data); err != nil {
		return nil, err
	}
	return []file.File{
		{Path: ScriptPath, Mode: 0o755, Content: s.Bytes(), Restarts: Timer},
		{Path: ServicePath, Mode: 0o644, Content: []byte(service), Restarts: Timer},
		{Path: TimerPath, Mode: 0o644, Content: t.Bytes(), Restarts: Timer},
	}, nil
}

func every(d time.Duration, calendar string) string {
	if calendar != "" {
		return calendar
	}
	return d.String()
}

// Interval is the longest time between two scheduled snapshots.
func Interval(sn *inventory.Snapshots) (time.Duration, error) {
	d, _, err := inventory.SnapshotSchedule(sn.Schedule)
	if err != nil {
		return 0, fmt.Errorf("cluster.etcd.snapshots.schedule: %w", err)
	}
	return d, nil
}
