package doctor

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

func TestClosestLabels(t *testing.T) {
	pods := func(sets ...map[string]string) []labelSet {
		var owners []string
		for i := range sets {
			owners = append(owners, "default/p"+string(rune('a'+i)))
		}
		return groupLabels(owners, sets)
	}
	nginx := map[string]string{"app": "nginx", "pod-template-hash": "7c5ddbdf54"}
	redis := map[string]string{"app": "redis", "pod-template-hash": "5f6b9d8c4"}
	for _, tc := range []struct {
		name     string
		selector string
		sets     []labelSet
		meant    string
		owners   int
		distance int
		none     bool
	}{
		{name: "the seed's typo: a transposed value", selector: "app=ngnix", sets: pods(redis, nginx), meant: "app=nginx", owners: 1, distance: 2},
		{name: "a typo in the key", selector: "ap=nginx", sets: pods(redis, nginx), meant: "app=nginx", owners: 1, distance: 1},
		{name: "the set more pods carry wins a tie", selector: "app=zzzzz", sets: pods(nginx, redis, redis), meant: "app=redis", owners: 2, distance: 5},
		{name: "two requirements, one wrong", selector: "app=nginx,tier=frontnd", sets: pods(map[string]string{"app": "nginx", "tier": "frontend"}, map[string]string{"app": "nginx", "tier": "backend"}),
			meant: "app=nginx,tier=frontend", owners: 1, distance: 1},
		{name: "a missing label costs its length", selector: "app=nginx,env=prod", sets: pods(nginx), meant: "app=nginx", owners: 1, distance: 0 + len("env") + len("prod")},
		{name: "set-based In takes the nearest value", selector: "app in (redis,nginz)", sets: pods(nginx), meant: "app=nginx", owners: 1, distance: 1},
		{name: "exists", selector: "ap", sets: pods(nginx), meant: "app=nginx", owners: 1, distance: 1},
		{name: "notin met costs nothing", selector: "app=nginx,tier notin (db)", sets: pods(nginx), meant: "app=nginx", owners: 1, distance: 0},
		{name: "notin violated costs one", selector: "app=ngin,app notin (nginx)", sets: pods(nginx), meant: "app=nginx", owners: 1, distance: 2},
		{name: "no label sets at all", selector: "app=nginx", none: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := labels.Parse(tc.selector)
			if err != nil {
				t.Fatal(err)
			}
			m, ok := closestLabels(sel, tc.sets)
			if ok == tc.none {
				t.Fatalf("found %v (%+v)", ok, m)
			}
			if tc.none {
				return
			}
			if m.meant != tc.meant || len(m.set.owners) != tc.owners || m.distance != tc.distance {
				t.Errorf("got %s (%d owners), distance %d; want %s (%d), %d", m.meant, len(m.set.owners), m.distance, tc.meant, tc.owners, tc.distance)
			}
		})
	}
}

func TestGroupLabels(t *testing.T) {
	a := map[string]string{"app": "a"}
	got := groupLabels([]string{"ns/z", "ns/x", "ns/y"}, []map[string]string{a, {"app": "b"}, {"app": "a"}})
	if len(got) != 2 || got[0].owners[0] != "ns/y" || got[0].owners[1] != "ns/z" || got[1].owners[0] != "ns/x" {
		t.Errorf("groups %+v", got)
	}
}

func TestCloseMatchDescribe(t *testing.T) {
	m := closeMatch{set: labelSet{owners: []string{"default/web-1", "default/web-2"}}, meant: "app=nginx", distance: 2}
	if got, want := m.describe("pod"), "closest labels app=nginx (2 pods, e.g. default/web-1; 2 edits away)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	m = closeMatch{set: labelSet{labels: map[string]string{"team": "a"}, owners: []string{"kcna-arch"}}, distance: 1}
	if got, want := m.describe("namespace"), "closest labels team=a (namespace kcna-arch; 1 edit away)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
