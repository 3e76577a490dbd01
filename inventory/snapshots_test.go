package inventory

import (
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func marshal(t *testing.T, m map[string]any) []byte {
	t.Helper()
	data, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestSnapshotSchedule(t *testing.T) {
	for _, c := range []struct {
		in       string
		interval time.Duration
		calendar string
		bad      bool
	}{
		{in: "6h", interval: 6 * time.Hour},
		{in: "1h30m", interval: 90 * time.Minute},
		{in: "20s", interval: 20 * time.Second},
		{in: "daily", interval: 24 * time.Hour, calendar: "daily"},
		{in: "weekly", interval: 7 * 24 * time.Hour, calendar: "weekly"},
		{in: "0 */12 * * *", bad: true},
		{in: "-6h", bad: true},
		{in: "", bad: true},
	} {
		d, cal, err := SnapshotSchedule(c.in)
		if (err != nil) != c.bad || d != c.interval || cal != c.calendar {
			t.Errorf("%q: %v %q %v", c.in, d, cal, err)
		}
	}
}

func TestSnapshotDefaultsAndWarning(t *testing.T) {
	m := baseDoc(t)
	at(m, "cluster")["etcd"] = map[string]any{"snapshots": map[string]any{}}
	inv, warnings, err := Parse(marshal(t, m))
	if err != nil {
		t.Fatal(err)
	}
	if sn := inv.Cluster.Etcd.Snapshots; sn.Schedule != DefaultSnapshotSchedule || sn.Keep != DefaultSnapshotKeep || len(warnings) != 0 {
		t.Errorf("defaults: %+v, warnings %v", sn, warnings)
	}
	at(m, "cluster")["etcd"] = map[string]any{"snapshots": map[string]any{"schedule": "30s", "keep": 2}}
	_, warnings, err = Parse(marshal(t, m))
	if err != nil || len(warnings) != 1 || warnings[0].Path != "cluster.etcd.snapshots.schedule" {
		t.Errorf("a 30 s schedule: warnings %v, err %v", warnings, err)
	}
	delete(at(m, "cluster"), "etcd")
	if inv, _, err := Parse(marshal(t, m)); err != nil || inv.Cluster.Etcd.Snapshots != nil {
		t.Errorf("no snapshots section: %v", err)
	}
}
