package inventory

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// aliasBombs are inventories of about size bytes whose aliases stand for
// billions of values: one node with many labels aliased as every other
// node (each 4-byte alias stands for the whole node), and nested lists of
// aliases, each level ten times the one below.
func aliasBombs(size int) map[string][]byte {
	var wide bytes.Buffer
	wide.WriteString("cluster: {endpoint: {vip: 10.0.0.100}, network: {nodeCIDR: 10.0.0.0/24}}\n")
	wide.WriteString("nodes: [&n {name: cp-1, role: control-plane, address: 10.0.0.11, labels: {")
	for i := 0; wide.Len() < size/2; i++ {
		fmt.Fprintf(&wide, "l%d: x, ", i)
	}
	wide.WriteString("}}")
	for wide.Len() < size-2 {
		wide.WriteString(", *n")
	}
	wide.WriteString("]\n")

	var deep bytes.Buffer
	deep.WriteString("nodes: [&a {name: a, labels: {k: v}}")
	prev := "a"
	for _, anchor := range []string{"b", "c", "d", "e"} {
		fmt.Fprintf(&deep, ", &%s [%s]", anchor, strings.TrimSuffix(strings.Repeat("*"+prev+",", 10), ","))
		prev = anchor
	}
	for deep.Len() < size-2 {
		deep.WriteString(",*e")
	}
	deep.WriteString("]\n")
	return map[string][]byte{"wide": wide.Bytes(), "deep": deep.Bytes()}
}

// A megabyte whose aliases stand for billions of values is refused, naming
// where the expansion went too far, in bounded memory: the walk never
// expands it. (Most of what it allocates is the YAML parser's tree of the
// file itself.)
func TestAliasExpansionIsBounded(t *testing.T) {
	for name, data := range aliasBombs(1 << 20) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, _, err := Parse(data)
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 100<<20 {
			t.Errorf("%s: refusing a 1 MB alias bomb allocated %d MB", name, alloc>>20)
		}
		var found bool
		for _, p := range Problems(err) {
			if strings.HasPrefix(p.Path, "nodes[") && strings.Contains(p.Message, "alias") && strings.Contains(p.Message, "10000 values") {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no problem about the aliases' expansion at nodes[...]: %v", name, err)
		}
	}
}

// Anchors and aliases in their ordinary use, one set of labels or taints
// shared by several nodes, stay accepted.
func TestSharedAliasesAreAccepted(t *testing.T) {
	var b strings.Builder
	b.WriteString("cluster: {endpoint: {vip: 10.0.0.100}, network: {nodeCIDR: 10.0.0.0/24}}\nnodes:\n")
	b.WriteString("- {name: cp-1, role: control-plane, address: 10.0.0.11, labels: &l {zone: a, rack: r1}, taints: &t ['gpu=true:NoSchedule']}\n")
	for i := 2; i <= 3; i++ {
		fmt.Fprintf(&b, "- {name: cp-%d, role: control-plane, address: 10.0.0.1%d, labels: *l, taints: *t}\n", i, i)
	}
	got, _, err := Parse([]byte(b.String()))
	if err != nil {
		t.Fatalf("shared labels and taints refused: %v", err)
	}
	if got.Nodes[2].Labels["rack"] != "r1" || len(got.Nodes[2].Taints) != 1 {
		t.Errorf("aliases not expanded: %+v", got.Nodes[2])
	}
}
