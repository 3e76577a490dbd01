package lab

import (
	"testing"
	"time"
)

// BenchmarkLabUp times `lab up` of the seven-node lab with cached binaries
// (goal: under 10 s) and weighs the idle lab. Run as root with
//
//	HOMELAB_E2E=1 go test ./infra/lab -run '^$' -bench LabUp -benchtime 5x
func BenchmarkLabUp(b *testing.B) {
	needLab(b)
	// The first up may build binaries: not what is measured.
	l := newTestLab(b)
	up(b, l)
	if err := l.Down(true); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var mem float64
	for i := 0; i < b.N; i++ {
		up(b, l)
		b.StopTimer()
		m, err := l.Memory()
		if err != nil {
			b.Fatal(err)
		}
		mem = figures{memKiB: m}.totalMiB()
		if err := l.Down(i < b.N-1); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/up")
	b.ReportMetric(mem, "MiB-idle-lab")
}

// BenchmarkCluster measures kubeadm init to seven Ready nodes and the
// memory of the lab with the HA control plane running (goal: under 3 GiB).
// One iteration takes minutes:
//
//	HOMELAB_E2E=1 go test ./infra/lab -run '^$' -bench Cluster -benchtime 1x -timeout 30m
func BenchmarkCluster(b *testing.B) {
	needLab(b)
	for i := 0; i < b.N; i++ {
		l := newTestLab(b)
		_, fig := bringUpCluster(b, l)
		time.Sleep(10 * time.Second)
		m, err := l.Memory()
		if err != nil {
			b.Fatal(err)
		}
		fig.memKiB = m
		fig.log(b)
		b.ReportMetric(fig.up.Seconds(), "s-lab-up")
		b.ReportMetric(fig.init.Seconds(), "s-kubeadm-init")
		b.ReportMetric(fig.toReady.Seconds(), "s-init-to-7-ready")
		b.ReportMetric(fig.totalMiB(), "MiB-lab")
		if err := l.Down(false); err != nil {
			b.Fatal(err)
		}
	}
}
