package program

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/etcdsnapshot"
	"github.com/homelab-dev/homelab/roles/file"
)

// snapshotRequires is what a control-plane node's scheduled snapshots run.
var snapshotRequires = []string{"etcdctl", "sha256sum"}

// declareSnapshotTimer keeps the node's snapshot timer enabled and
// running when the inventory schedules snapshots (roles/etcdsnapshot
// rendered its files); a changed script, service or timer restarts it.
// Without a schedule there is no timer: removing the schedule disables it
// and the files go. With an off-site bucket, the timer starts once rclone
// is installed and its configuration written.
func declareSnapshotTimer(ctx *pulumi.Context, parent pulumi.Resource, cfg Config, n inventory.Node, conn pulumi.Map, files []file.File, nf *nodeFiles) error {
	paths := []string{etcdsnapshot.ScriptPath, etcdsnapshot.ServicePath, etcdsnapshot.TimerPath, etcdsnapshot.RcloneConfigPath, etcdsnapshot.CAPath}
	deps := nf.get(paths...)
	if len(deps) == 0 {
		return nil
	}
	if s3 := cfg.Inventory.Cluster.Etcd.SnapshotsS3(); s3 != nil {
		rclone, err := register(ctx, "Package", n.Name+":"+etcdsnapshot.RclonePackage, pulumi.Map{
			"connection":    conn,
			"names":         pulumi.ToStringArray([]string{etcdsnapshot.RclonePackage}),
			"pinnedVersion": pulumi.String(s3.Rclone),
			"anyRevision":   pulumi.Bool(inventory.UpstreamVersion(s3.Rclone) == s3.Rclone),
		}, &PackageHandle{}, pulumi.Parent(parent), pulumi.DependsOn(nf.get(etcdsnapshot.RcloneConfigPath)))
		if err != nil {
			return err
		}
		deps = append(deps, rclone)
	}
	_, err := register(ctx, "Service", n.Name+":"+etcdsnapshot.Timer, pulumi.Map{
		"connection": conn,
		"name":       pulumi.String(etcdsnapshot.Timer),
		"trigger":    pulumi.String(file.Trigger(files, etcdsnapshot.Timer)),
	}, &ServiceHandle{}, pulumi.Parent(parent), pulumi.DependsOn(deps))
	return err
}
