package program

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/etcdsnapshot"
)

// A snapshot schedule gives every control-plane node its timer, started
// after its files, and makes etcdctl a required tool; workers get none,
// and without a schedule there is no timer anywhere.
func TestSnapshotTimerPerControlPlaneNode(t *testing.T) {
	m := runMockedWith(t, func(inv *inventory.Inventory) {
		inv.Cluster.Etcd.Snapshots = &inventory.Snapshots{Schedule: "6h", Keep: 3}
	})
	for _, n := range []string{"cp-1", "cp-2", "cp-3"} {
		r := m.get(t, "homelab:index:Service", n+":"+etcdsnapshot.Timer)
		if !dependsOn(r, "homelab:index:File", n+":"+etcdsnapshot.TimerPath) || !dependsOn(r, "homelab:index:File", n+":"+etcdsnapshot.ScriptPath) {
			t.Errorf("%s's timer does not wait for its files: %v", n, r.deps)
		}
		if trig := r.inputs["trigger"].StringValue(); len(strings.Split(trig, ",")) != 3 {
			t.Errorf("%s's trigger %q", n, trig)
		}
		var requires []string
		for _, v := range m.get(t, "homelab:index:Host", n).inputs["requires"].ArrayValue() {
			requires = append(requires, v.StringValue())
		}
		if !slices.Contains(requires, "etcdctl") {
			t.Errorf("%s requires %v", n, requires)
		}
	}
	for k := range m.all {
		if strings.Contains(k, etcdsnapshot.Timer) && strings.Contains(k, "gpu-") {
			t.Errorf("a worker got a snapshot timer: %s", k)
		}
	}
	for k := range runMocked(t, inventory.LayoutVIP).all {
		if strings.Contains(k, "etcd-snapshot") {
			t.Errorf("no schedule, yet %s", k)
		}
	}
}

// An off-site bucket gives every control-plane node rclone at the pinned
// version and its configuration as a secret, both before the timer
// starts; the keys appear in no input but that secret.
func TestSnapshotsOffsite(t *testing.T) {
	const secret = "s3cr3t-value"
	m := runMockedWith(t, func(inv *inventory.Inventory) {
		inv.Cluster.Etcd.Snapshots = &inventory.Snapshots{Schedule: "6h", Keep: 3, S3: &inventory.SnapshotsS3{
			Endpoint: "https://nas.lan:9000", Bucket: "backups", Prefix: "homelab/etcd/", Region: "us-east-1",
			Credentials: inventory.S3Credentials{File: "/k", Profile: "default"}, Rclone: inventory.DefaultRclone}}
	}, func(c *Config) {
		c.SnapshotsS3Keys = inventory.S3Keys{AccessKeyID: "AKID", SecretAccessKey: secret}
	})
	for _, n := range []string{"cp-1", "cp-2", "cp-3"} {
		timer := m.get(t, "homelab:index:Service", n+":"+etcdsnapshot.Timer)
		if !dependsOn(timer, "homelab:index:Package", n+":rclone") || !dependsOn(timer, "homelab:index:File", n+":"+etcdsnapshot.RcloneConfigPath) {
			t.Errorf("%s's timer starts before rclone and its configuration: %v", n, timer.deps)
		}
		pkg := m.get(t, "homelab:index:Package", n+":rclone")
		if pkg.inputs["pinnedVersion"].StringValue() != inventory.DefaultRclone || !pkg.inputs["anyRevision"].BoolValue() {
			t.Errorf("%s's rclone: %v", n, pkg.inputs)
		}
		conf := m.get(t, "homelab:index:File", n+":"+etcdsnapshot.RcloneConfigPath)
		if !conf.inputs["content"].IsSecret() || conf.inputs["mode"].NumberValue() != 0o600 {
			t.Errorf("%s's rclone configuration is not a 0600 secret: %v", n, conf.inputs)
		}
	}
	for k, r := range m.all {
		if strings.Contains(k, "gpu-") && (strings.Contains(k, "rclone") || strings.Contains(k, "etcd-snapshots-s3")) {
			t.Errorf("a worker got %s", k)
		}
		// Mappable hides secret values: what it shows is plain state.
		if strings.Contains(fmt.Sprint(r.inputs.Mappable()), secret) {
			t.Errorf("%s holds the secret key in plain", k)
		}
		if c := r.inputs["content"]; strings.HasSuffix(k, ":"+etcdsnapshot.RcloneConfigPath) && !strings.Contains(c.SecretValue().Element.StringValue(), secret) {
			t.Errorf("%s lacks the key", k)
		}
	}
}
