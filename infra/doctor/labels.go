package doctor

import (
	"fmt"
	"sort"

	"github.com/agext/levenshtein"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// labelSet is one distinct set of labels, and who carries it.
type labelSet struct {
	labels map[string]string
	owners []string // "ns/name", sorted
}

// groupLabels makes one labelSet per distinct label map.
func groupLabels(owners []string, sets []map[string]string) []labelSet {
	byKey := map[string]*labelSet{}
	var keys []string
	for i, l := range sets {
		k := labels.Set(l).String()
		if byKey[k] == nil {
			byKey[k] = &labelSet{labels: l}
			keys = append(keys, k)
		}
		byKey[k].owners = append(byKey[k].owners, owners[i])
	}
	sort.Strings(keys)
	out := make([]labelSet, 0, len(keys))
	for _, k := range keys {
		sort.Strings(byKey[k].owners)
		out = append(out, *byKey[k])
	}
	return out
}

// closeMatch is the label set a selector most likely meant.
type closeMatch struct {
	set labelSet
	// meant are the set's labels the selector's requirements pair with
	// ("app=nginx" for "app=ngnix").
	meant    string
	distance int
}

// closestLabels finds, among sets, the one a selector is the fewest
// single-character edits away from: each of its requirements paired with
// the label whose key and value are nearest (a typo may be in either).
// Ties go to the set more objects carry, then to the first in order.
func closestLabels(sel labels.Selector, sets []labelSet) (closeMatch, bool) {
	reqs, _ := sel.Requirements()
	best, found := closeMatch{}, false
	for _, s := range sets {
		total := 0
		meant := map[string]string{}
		for _, r := range reqs {
			cost, k := requirementCost(r, s.labels)
			total += cost
			if k != "" {
				meant[k] = s.labels[k]
			}
		}
		m := closeMatch{set: s, meant: labels.Set(meant).String(), distance: total}
		if !found || m.distance < best.distance || (m.distance == best.distance && len(s.owners) > len(best.set.owners)) {
			best, found = m, true
		}
	}
	return best, found
}

// requirementCost is how many edits make set satisfy r, and the label key
// it pairs with ("" none).
func requirementCost(r labels.Requirement, set map[string]string) (int, string) {
	key := r.Key()
	switch r.Operator() {
	case selection.Equals, selection.DoubleEquals, selection.In:
		best, bestKey := len(key)+minLen(r.Values().List()), ""
		for k, v := range set {
			c := distance(key, k)
			vc := -1
			for _, want := range r.Values().List() {
				if d := distance(want, v); vc < 0 || d < vc {
					vc = d
				}
			}
			if c+vc < best || (c+vc == best && bestKey != "" && k < bestKey) {
				best, bestKey = c+vc, k
			}
		}
		return best, bestKey
	case selection.Exists:
		best, bestKey := len(key), ""
		for k := range set {
			if c := distance(key, k); c < best || (c == best && bestKey != "" && k < bestKey) {
				best, bestKey = c, k
			}
		}
		return best, bestKey
	default: // NotIn, DoesNotExist, Gt, Lt: met or not
		if r.Matches(labels.Set(set)) {
			return 0, ""
		}
		if _, ok := set[key]; ok {
			return 1, key
		}
		return 1, ""
	}
}

func distance(a, b string) int { return levenshtein.Distance(a, b, nil) }

func minLen(ss []string) int {
	m := -1
	for _, s := range ss {
		if m < 0 || len(s) < m {
			m = len(s)
		}
	}
	if m < 0 {
		return 0
	}
	return m
}

// describe says, for a finding, which labels the selector came closest
// to, carried by which objects (kind "pod", "namespace").
func (m closeMatch) describe(kind string) string {
	meant := m.meant
	if meant == "" {
		meant = labels.Set(m.set.labels).String()
	}
	who := kind + " " + m.set.owners[0]
	if n := len(m.set.owners); n > 1 {
		who = fmt.Sprintf("%d %ss, e.g. %s", n, kind, m.set.owners[0])
	}
	edits := "edits"
	if m.distance == 1 {
		edits = "edit"
	}
	return fmt.Sprintf("closest labels %s (%s; %d %s away)", meant, who, m.distance, edits)
}
