package etcdbackup_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/homelab-dev/homelab/infra/etcdbackup"
)

// BenchmarkRestore measures, in one run on a fresh lab: a snapshot of a
// cluster holding 1,000 ConfigMaps (time and size), and the recovery
// from "two control-plane nodes powered off and replaced" to "verify
// passes" (the restore, then the up that joins the new machines, then
// verify), each against the fresh up that built the cluster. Figures,
// never assertions:
//
//	HOMELAB_E2E=1 go test ./infra/etcdbackup -run '^$' -bench Restore -benchtime 1x -timeout 40m
func BenchmarkRestore(b *testing.B) {
	needE2E(b)
	ctx, cancel := context.WithTimeout(context.Background(), 35*time.Minute)
	defer cancel()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		d := newDrill(b, ctx)
		s := d.open(ctx)
		start := time.Now()
		d.up(ctx, s)
		d.verify(ctx, s)
		fresh := time.Since(start)
		cs := d.clientset(ctx, s)
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		d.writeConfigMaps(ctx, cs, 0, 1000)
		tg := d.target(s, nil)
		snap := filepath.Join(d.lab.Work, "bench.db")
		start = time.Now()
		meta, err := etcdbackup.Take(ctx, tg, snap, "")
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		fi, _ := os.Stat(snap)

		d.replace(ctx, "cp-2", "cp-3")
		start = time.Now()
		s = d.open(ctx)
		rep, err := etcdbackup.Restore(ctx, d.target(s, nil), etcdbackup.RestoreOptions{From: snap})
		if err != nil {
			b.Fatal(err)
		}
		d.up(ctx, s)
		d.verify(ctx, s)
		recovery := time.Since(start)
		if n := len(d.configMaps(ctx, s)); n != 1000 {
			b.Errorf("%d ConfigMaps after the restore, want 1000", n)
		}
		b.ReportMetric(took.Seconds(), "snapshot-s")
		b.ReportMetric(float64(fi.Size())/(1<<20), "snapshot-MiB")
		b.ReportMetric(float64(meta.TotalKeys), "snapshot-keys")
		b.ReportMetric(rep.Took.Seconds(), "restore-s")
		b.ReportMetric(recovery.Seconds(), "replaced-to-verified-s")
		b.ReportMetric(fresh.Seconds(), "fresh-up-verified-s")
		b.ReportMetric(recovery.Seconds()/fresh.Seconds(), "recovery/fresh")
		b.Logf("figures: snapshot %s, %d bytes, revision %d, %d keys; restore %s; replaced to verified %s; fresh up and verify %s",
			took.Round(time.Millisecond), fi.Size(), meta.Revision, meta.TotalKeys, rep.Took.Round(time.Millisecond), recovery.Round(time.Millisecond), fresh.Round(time.Millisecond))
	}
}
