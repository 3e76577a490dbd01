package program

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/homelab-dev/homelab/roles/etcdsnapshot"
	"github.com/homelab-dev/homelab/roles/file"
)

// snapshotRequires is what a control-plane node's scheduled snapshots run.
var snapshotRequires = []string{"etcdctl", "sha256sum"}

// declareSnapshotTimer keeps the node's snapshot timer enabled and
// running when the inventory schedules snapshots (roles/etcdsnapshot
// rendered its files); a changed script, service or timer restarts it.
// Without a schedule there is no timer: removing the schedule disables it
// and the files go.
func declareSnapshotTimer(ctx *pulumi.Context, parent pulumi.Resource, conn pulumi.Map, node string, files []file.File, nf *nodeFiles) error {
	paths := []string{etcdsnapshot.ScriptPath, etcdsnapshot.ServicePath, etcdsnapshot.TimerPath}
	deps := nf.get(paths...)
	if len(deps) == 0 {
		return nil
	}
	_, err := register(ctx, "Service", node+":"+etcdsnapshot.Timer, pulumi.Map{
		"connection": conn,
		"name":       pulumi.String(etcdsnapshot.Timer),
		"trigger":    pulumi.String(file.Trigger(files, etcdsnapshot.Timer)),
	}, &ServiceHandle{}, pulumi.Parent(parent), pulumi.DependsOn(deps))
	return err
}
